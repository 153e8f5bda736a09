-- queue_extend: move the visibility deadline of a delivery in flight.
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] the publish command (the timer channel is KEYS[1]..':ch'), ARGV[2] id, ARGV[3] delivery number,
-- ARGV[4] the new visibility from now, in ms
-- Returns {deadline, now} (server clock, unix ms), or false when the
-- delivery is no longer in flight.
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
