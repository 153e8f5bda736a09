-- queue_ack: acknowledge a delivery of a reliable queue; the item is done.
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] the publish command (unused), ARGV[2] id, ARGV[3] delivery number
-- Returns 1 when acknowledged, 0 when the delivery is no longer in flight
-- (its visibility timeout ran out and it was delivered again, or it was
-- acknowledged already).
local id = ARGV[2]
if redis.call('hget', KEYS[8], id) ~= ARGV[3] or not redis.call('zscore', KEYS[7], id) then
  return 0
end
redis.call('zrem', KEYS[7], id)
redis.call('hdel', KEYS[3], id)
redis.call('hdel', KEYS[8], id)
redis.call('hdel', KEYS[10], id)
return 1
