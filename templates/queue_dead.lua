-- queue_dead: list dead letters, oldest first.
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] the publish command (unused), ARGV[2] how many to skip, ARGV[3] how
-- many to return
-- Returns {id, body, reason, deliveries, id, body, ...}; a missing field
-- is ''.
local first = tonumber(ARGV[2])
local ids = redis.call('lrange', KEYS[9], first, first + tonumber(ARGV[3]) - 1)
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('hget', KEYS[3], id) or ''
  out[#out + 1] = redis.call('hget', KEYS[10], id) or ''
  out[#out + 1] = redis.call('hget', KEYS[8], id) or '0'
end
return out
