-- queue_redrive: put the oldest dead letters back on the ready list, with
-- their delivery count reset.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- KEYS[12] record: this call's record, KEYS[1]..':op:'..op (op unique
--   across clients): its reply, for record_ms
-- ARGV[1] publish: the command that publishes wake-ups (publish or
--   spublish)
-- ARGV[2] mode: 'r' reliable, 'p' plain
-- ARGV[3] n: how many at most
-- ARGV[4] resent: '' when the call is sent the first time, '!' when it
--   is sent again (go-redis writes it so: a lost reply, a redirect, the
--   EVAL after NOSCRIPT); only then is the record read
-- ARGV[5] record_ms: how long the record lives
-- reply: int
--   How many were put back (a second run of the call answers the first
--   run's count and moves nothing: one SET, two commands on a resend).
-- #include queue
if ARGV[4] == '!' then -- it may have run: answer as it did
  local prev = redis.call('get', KEYS[12])
  if prev then
    return tonumber(prev)
  end
end
local moved = 0
for _ = 1, tonumber(ARGV[3]) do
  local id = redis.call('lpop', KEYS[9])
  if not id then
    break
  end
  redis.call('hdel', KEYS[8], id)
  redis.call('hdel', KEYS[10], id)
  if ARGV[2] == 'r' then
    redis.call('rpush', KEYS[1], id)
  else
    local body = redis.call('hget', KEYS[3], id)
    redis.call('hdel', KEYS[3], id)
    if body then
      redis.call('rpush', KEYS[1], body)
    end
  end
  moved = moved + 1
end
queue_wake(KEYS[1], KEYS[11], ARGV[1], moved, nil)
redis.call('set', KEYS[12], moved, 'PX', ARGV[5])
return moved
