-- queue_nack: give a delivery of a reliable queue back: deliver it again
-- (now, or after a delay), dead-letter it when it reached max deliveries
-- (or when asked to), or put it back unharmed.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the command that publishes on the timer channel,
--   KEYS[1]..':ch', and wakes waiting consumers (publish or spublish)
-- ARGV[2] id: the item's id
-- ARGV[3] delivery: the delivery number
-- ARGV[4] max_deliveries: deliveries before an item is dead
-- ARGV[5] reason: why it was given back
-- ARGV[6] dead: '1' to dead-letter now, '0' to deliver again, 'b' to put
--   it back at the head of the queue without counting this delivery (a
--   worker shutting down)
-- ARGV[7] delay_ms: the delay before it is delivered again, in
--   milliseconds ('' or '0': now)
-- reply: int
--   1 when queued again, 2 when dead-lettered, 3 when delayed, 0 when the
--   delivery is no longer in flight.
-- #include queue
local id = ARGV[2]
local n = redis.call('hget', KEYS[8], id)
if n ~= ARGV[3] or not redis.call('zscore', KEYS[7], id) then
  return 0
end
redis.call('zrem', KEYS[7], id)
if ARGV[6] == 'b' then
  redis.call('hincrby', KEYS[8], id, -1)
  redis.call('lpush', KEYS[1], id)
  queue_wake(KEYS[1], KEYS[11], ARGV[1], 1, nil)
  return 1
end
redis.call('hset', KEYS[10], id, ARGV[5])
if ARGV[6] == '1' or tonumber(n) >= tonumber(ARGV[4]) then
  redis.call('rpush', KEYS[9], id)
  return 2
end
local delay = tonumber(ARGV[7]) or 0
if delay <= 0 then
  redis.call('rpush', KEYS[1], id)
  queue_wake(KEYS[1], KEYS[11], ARGV[1], 1, nil)
  return 1
end
local now = queue_now_ms()
local due = now + delay
redis.call('zadd', KEYS[2], due, id)
local armed = redis.call('get', KEYS[5])
if not armed or due < tonumber(armed) then
  redis.call('set', KEYS[5], due, 'px', delay + 1000)
  redis.call(ARGV[1], KEYS[1] .. ':ch', due)
end
return 3
