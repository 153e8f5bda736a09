-- queue_redrive: put the oldest dead letters back on the ready list, with
-- their delivery count reset.
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] the publish command (unused), ARGV[2] mode ('r' reliable, 'p' plain),
-- ARGV[3] how many at most
-- Returns how many were put back.
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
