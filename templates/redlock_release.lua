-- redlock_release: compare-and-delete a RedLock's value on one node and
-- wake that node's waiters (RedLock waiters wait for messages from a
-- majority of the nodes, so every release publishes).
-- KEYS[1] lock: the lock key (value: the attempt's value)
-- ARGV[1] value: the attempt's value
-- ARGV[2] lease_ms: the lease in milliseconds (unused)
-- ARGV[3] channel: the wake-up channel
-- ARGV[4] publish: the publish command (publish or spublish)
-- reply: int
--   -1 when the value is not there, 0 when released.
local lock = KEYS[1]

if redis.call('get', lock) ~= ARGV[1] then
  return -1
end
redis.call('del', lock)
redis.call(ARGV[4], ARGV[3], 'released')
return 0
