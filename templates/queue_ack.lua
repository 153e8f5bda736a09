-- queue_ack: acknowledge a delivery of a reliable queue; the item is done.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] id: the item's id
-- ARGV[3] delivery: the delivery number
-- reply: int
--   1 when acknowledged, 0 when the delivery is no longer in flight (its
--   visibility timeout ran out and it was delivered again, or it was
--   acknowledged already). A first delivery costs 5 commands (EVALSHA,
--   HGET, ZREM, HDEL, HDEL).
local id = ARGV[2]
if redis.call('hget', KEYS[8], id) ~= ARGV[3] or redis.call('zrem', KEYS[7], id) == 0 then
  return 0
end
redis.call('hdel', KEYS[3], id)
redis.call('hdel', KEYS[8], id)
if ARGV[3] ~= '1' then
  -- A reason is recorded by a give-back (queue_nack), after which the
  -- item is delivered again; a re-drive deletes it with the count.
  redis.call('hdel', KEYS[10], id)
end
return 1
