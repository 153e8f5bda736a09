-- queue_pause: pause a queue's consumers, resume them, or read whether
-- they are paused. A paused queue takes offers as usual (the delay timer
-- goes on moving due items too); its Takes, plain and reliable, waiting
-- ones included, take nothing and wait (queue_take, queue_pop and
-- queue_wait read the pause key). Resuming wakes as many waiting
-- consumers as items are ready.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- KEYS[12] paused: KEYS[1]..':paused', while the queue is paused: when
--   it was paused (unix ms, server clock)
-- ARGV[1] publish: the command that publishes wake-ups (publish or
--   spublish)
-- ARGV[2] action: 'pause', 'resume', or '' to read only
-- reply: int
--   When the queue was paused (unix ms, server clock), 0 when it is not
--   paused, as the action leaves it: a pause of a paused queue answers
--   the first pause's time, a resume 0. Running it twice answers the
--   same and changes nothing more (a second resume wakes nobody).
-- #include queue
local since = tonumber(redis.call('get', KEYS[12]) or '0')
if ARGV[2] == 'pause' and since == 0 then
  since = queue_now_ms()
  redis.call('set', KEYS[12], since)
elseif ARGV[2] == 'resume' and since > 0 then
  redis.call('del', KEYS[12])
  since = 0
  queue_wake(KEYS[1], KEYS[11], ARGV[1], redis.call('llen', KEYS[1]), nil)
end
return since
