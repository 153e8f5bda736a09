-- rw_force_unlock: delete a read-write lock whoever holds either side, and
-- wake its waiters.
-- KEYS[1] lock: the lock hash ("writer" -> the write holder's owner id,
--   "writes" -> its hold count, "r:<owner>" -> a reader's hold count, "q"
--   -> 1 while waiters may be registered)
-- KEYS[2] holds: the holds' deadlines (a zset: "w" for the write hold,
--   "r:<owner>" per reader -> server ms when that hold's lease runs out),
--   so a dead reader's share runs out alone
-- KEYS[3] queue: the waiter registry's wait queue (members "<owner> r|w")
-- KEYS[4] waiters: the waiter registry's deadlines
-- ARGV[1] prefix: the wake-up channel prefix
-- ARGV[2] publish: the publish command (publish or spublish)
-- ARGV[3]? handoff_ms: the hand-off lease in milliseconds (unused: nobody
--   is handed a lock that was forced open)
-- reply: int
--   1 when a lock was deleted, 0 when it was not held. Each client with a
--   live waiter gets "all": its waiters try again, and the first of them
--   hands the lock on in arrival order (see rw_hand_on).
-- #include registry
if redis.call('del', KEYS[1], KEYS[2]) > 0 then
  notify_all(ARGV[2], ARGV[1], KEYS[3], KEYS[4], now_ms())
  return 1
end
return 0
