-- queue_redrive: put the oldest dead letters back on the ready list, with
-- their delivery count reset.
-- KEYS[1..10] ready, delayed, data, seq, armed, proc, inflight, att, dead, err:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] mode: 'r' reliable, 'p' plain
-- ARGV[3] n: how many at most
-- reply: int
--   How many were put back.
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
return moved
