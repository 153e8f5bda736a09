-- queue_drain: take the first ready items out of a queue for good (at
-- most once, also for a reliable queue: they are not put in flight).
-- KEYS[1..10] ready, delayed, data, seq, armed, proc, inflight, att, dead, err:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] mode: 'r' reliable (the ready list holds ids) or 'p' plain (it
--   holds bodies)
-- ARGV[3] n: how many at most
-- reply: {int, string...}
--   {ready items left, body, body, ...}; an id whose body is gone is
--   passed over.
local taken = redis.call('lpop', KEYS[1], ARGV[3])
local out = {0}
if taken then
  if ARGV[2] == 'r' then
    local bodies = redis.call('hmget', KEYS[3], unpack(taken))
    redis.call('hdel', KEYS[3], unpack(taken))
    redis.call('hdel', KEYS[8], unpack(taken))
    redis.call('hdel', KEYS[10], unpack(taken))
    for i = 1, #taken do
      if bodies[i] then
        out[#out + 1] = bodies[i]
      end
    end
  else
    for _, body in ipairs(taken) do
      out[#out + 1] = body
    end
  end
end
out[1] = redis.call('llen', KEYS[1])
return out
