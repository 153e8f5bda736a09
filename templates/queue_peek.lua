-- queue_peek: the bodies of the first ready items of a reliable queue,
-- without taking them (a plain queue's ready list holds the bodies, so
-- the runtime reads it with LRANGE instead).
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] n: how many at most
-- reply: {string...}
--   The bodies, first ready first; an id whose body is gone (a race with
--   its acknowledgement) is passed over.
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
