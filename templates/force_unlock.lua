-- force_unlock: delete a lock whoever holds it, and wake its waiters.
-- KEYS[1] the lock key; KEYS[2], KEYS[3] the waiter registry (queue,
-- waiters), absent for a RedLock node
-- ARGV[1] the wake-up channel prefix (with a registry: a client's channel
-- is prefix:<clientID>, and each client with a live waiter gets "all";
-- without: the channel itself, which gets "released"), ARGV[2] the publish
-- command (publish or spublish)
-- Returns 1 when a lock was deleted, 0 when it was not held.
-- #include registry
local lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3]

if redis.call('del', lock) == 0 then
  return 0
end
if queue then
  notify_all(ARGV[2], ARGV[1], queue, waiters, now_ms())
else
  redis.call(ARGV[2], ARGV[1], 'released')
end
return 1
