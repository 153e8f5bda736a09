-- queue_nack: give a delivery of a reliable queue back: deliver it again,
-- or dead-letter it when it reached max deliveries (or when asked to).
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] timer channel (unused), ARGV[2] id, ARGV[3] delivery number,
-- ARGV[4] max deliveries, ARGV[5] reason, ARGV[6] '1' to dead-letter now
-- Returns 1 when queued again, 2 when dead-lettered, 0 when the delivery
-- is no longer in flight.
local id = ARGV[2]
local n = redis.call('hget', KEYS[8], id)
if n ~= ARGV[3] or not redis.call('zscore', KEYS[7], id) then
  return 0
end
redis.call('zrem', KEYS[7], id)
redis.call('hset', KEYS[10], id, ARGV[5])
if ARGV[6] == '1' or tonumber(n) >= tonumber(ARGV[4]) then
  redis.call('rpush', KEYS[9], id)
  return 2
end
redis.call('rpush', KEYS[1], id)
return 1
