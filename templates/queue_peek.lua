-- queue_peek: the bodies of the first ready items of a reliable queue,
-- without taking them (a plain queue's ready list holds the bodies, so
-- the runtime reads it with LRANGE instead).
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] the publish command (unused), ARGV[2] how many at most
-- Returns the bodies, first ready first; an id whose body is gone (a
-- race with its acknowledgement) is passed over.
local n = tonumber(ARGV[2])
local out = {}
local first = 0
while #out < n do
  local ids = redis.call('lrange', KEYS[1], first, first + n - #out - 1)
  if #ids == 0 then
    break
  end
  first = first + #ids
  for _, body in ipairs(redis.call('hmget', KEYS[3], unpack(ids))) do
    if body then
      out[#out + 1] = body
    end
  end
end
return out
