-- rw_force_unlock: delete a read-write lock whoever holds either side, and
-- wake every waiter.
-- KEYS[1] the lock hash, KEYS[2] the holds' deadlines
-- ARGV[1] wake-up channel, ARGV[2] the publish command (publish or
-- spublish)
-- Returns 1 when a lock was deleted, 0 when it was not held.
if redis.call('del', KEYS[1], KEYS[2]) > 0 then
  redis.call(ARGV[2], ARGV[1], 'all')
  return 1
end
return 0
