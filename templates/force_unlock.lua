-- force_unlock: delete a lock whoever holds it, and wake its waiters.
-- KEYS[1] lock: the lock key
-- KEYS[2]? queue: the waiter registry's wait queue (a caller may pass
--   neither queue nor waiters)
-- KEYS[3]? waiters: the waiter registry's deadlines
-- KEYS[4]? fence: a fenced lock's fence counter (unused: it outlives the
--   lock)
-- ARGV[1] prefix: the wake-up channel prefix (with a registry: a client's
--   channel is prefix:<clientID>, and each client with a live waiter gets
--   "all"; without: the channel itself, which gets "released")
-- ARGV[2] publish: the publish command (publish or spublish)
-- ARGV[3]? handoff_ms: the hand-off lease in milliseconds (unused: nobody
--   is handed a lock that was forced open)
-- reply: int
--   1 when a lock was deleted, 0 when it was not held.
-- #include registry
local lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3]

if redis.call('del', lock) == 0 then
  return 0
end
if queue then
  notify_all(ARGV[2], ARGV[1], queue, waiters, now_ms())
else
  redis.call(publish_cmd(ARGV[2]), ARGV[1], 'released')
end
return 1
