-- queue_drain: take the first ready items out of a queue for good (at
-- most once, also for a reliable queue: they are not put in flight).
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- KEYS[12] record: this call's record, KEYS[1]..':op:'..op (op unique
--   across clients): its reply, for record_ms
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] mode: 'r' reliable (the ready list holds ids) or 'p' plain (it
--   holds bodies)
-- ARGV[3] n: how many at most
-- ARGV[4] resent: '' when the call is sent the first time, '!' when it
--   is sent again (go-redis writes it so: a lost reply, a redirect, the
--   EVAL after NOSCRIPT); only then is the record read
-- ARGV[5] record_ms: how long the record lives
-- reply: {int, string...}
--   {ready items left, body, body, ...}; an id whose body is gone is
--   passed over. A second run of the call answers the first run's reply
--   (its bodies, kept in the record with cmsgpack) and takes nothing: one
--   SET, two commands on a resend.
if ARGV[4] == '!' then -- it may have run: answer as it did
  local prev = redis.call('get', KEYS[12])
  if prev then
    return cmsgpack.unpack(prev)
  end
end
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
redis.call('set', KEYS[12], cmsgpack.pack(out), 'PX', ARGV[5])
return out
