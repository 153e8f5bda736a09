-- rw_force_unlock: delete a read-write lock whoever holds either side, and
-- wake its waiters.
-- KEYS[1] the lock hash, KEYS[2] the holds' deadlines, KEYS[3], KEYS[4]
-- the waiter registry (queue, waiters)
-- ARGV[1] the wake-up channel prefix, ARGV[2] the publish command
-- (publish or spublish)
-- Returns 1 when a lock was deleted, 0 when it was not held. Each client
-- with a live waiter gets "all": its waiters try again, and the first of
-- them hands the lock on in arrival order (see rw_hand_on).
-- #include registry
if redis.call('del', KEYS[1], KEYS[2]) > 0 then
  notify_all(ARGV[2], ARGV[1], KEYS[3], KEYS[4], now_ms())
  return 1
end
return 0
