-- force_unlock: delete a lock whoever holds it, and wake its waiters.
-- KEYS[1] the lock key
-- ARGV[1] wake-up channel
-- Returns 1 when a lock was deleted, 0 when it was not held.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', ARGV[1], 'released')
  return 1
end
return 0
