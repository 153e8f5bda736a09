-- queue_dead: list dead letters, oldest first.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] skip: how many to skip
-- ARGV[3] n: how many to return
-- reply: {string...}
--   {id, body, reason, deliveries, id, body, ...}; a missing field is ''.
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
