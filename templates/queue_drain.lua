-- queue_drain: take the first ready items out of a queue for good (at
-- most once, also for a reliable queue: they are not put in flight).
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] the publish command (unused), ARGV[2] mode ('r' reliable: the
-- ready list holds ids; 'p' plain: it holds bodies), ARGV[3] how many at
-- most
-- Returns {ready items left, body, body, ...}; an id whose body is gone
-- is passed over.
local taken = redis.call('lpop', KEYS[1], tonumber(ARGV[3]))
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
