-- fair_force_unlock: delete a fair lock whoever holds it, and hand it to
-- the first live waiter.
-- KEYS[1] the lock hash, KEYS[2], KEYS[3] the waiter registry (queue,
-- waiters)
-- ARGV[1] the wake-up channel prefix, ARGV[2] the publish command,
-- ARGV[3] the hand-off lease in milliseconds
-- Returns 1 when a lock was deleted, 0 when it was not held.
-- #include registry
local lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3]

if redis.call('del', lock) == 0 then
  return 0
end
local next = pop(queue, waiters, now_ms())
if next then
  redis.call('hset', lock, next, 1)
  redis.call('pexpire', lock, tonumber(ARGV[3]))
  notify(ARGV[2], ARGV[1], next, next)
end
return 1
