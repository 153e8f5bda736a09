-- fair_force_unlock: delete a fair lock whoever holds it, and hand it to
-- the first live waiter.
-- KEYS[1] lock: the lock hash
-- KEYS[2] queue: the waiter registry's wait queue
-- KEYS[3] waiters: the waiter registry's deadlines
-- ARGV[1] prefix: the wake-up channel prefix
-- ARGV[2] publish: the publish command (publish or spublish)
-- ARGV[3] handoff_ms: the hand-off lease in milliseconds
-- reply: int
--   1 when a lock was deleted, 0 when it was not held.
-- #include registry
local lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3]

if redis.call('del', lock) == 0 then
  return 0
end
local now = now_ms()
local next = pop(queue, waiters, now)
while next and not notify(ARGV[2], ARGV[1], next, handed_at(next, now)) do
  next = pop(queue, waiters, now, true) -- its client no longer listens
end
if next then
  redis.call('hset', lock, next, 1)
  redis.call('pexpire', lock, ARGV[3])
end
return 1
