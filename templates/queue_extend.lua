-- queue_extend: move the visibility deadline of a delivery in flight.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the command that publishes on the timer channel,
--   KEYS[1]..':ch' (publish or spublish)
-- ARGV[2] id: the item's id
-- ARGV[3] delivery: the delivery number
-- ARGV[4] visibility_ms: the new visibility from now, in milliseconds
-- reply: {int, int} | nil
--   {deadline, now} (server clock, unix ms), or false when the delivery is
--   no longer in flight.
local id = ARGV[2]
if redis.call('hget', KEYS[8], id) ~= ARGV[3] or not redis.call('zscore', KEYS[7], id) then
  return false
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + tonumber(ARGV[4])
redis.call('zadd', KEYS[7], deadline, id)
local armed = redis.call('get', KEYS[5])
if not armed or deadline < tonumber(armed) then
  redis.call('set', KEYS[5], deadline, 'px', deadline - now + 1000)
  redis.call(ARGV[1], KEYS[1] .. ':ch', deadline)
end
return {deadline, now}
