-- fair_renew: extend the lease of a held fair lock.
-- KEYS[1] lock: the lock hash (field: owner, value: hold count)
-- KEYS[2] queue: the waiter registry's wait queue (unused)
-- KEYS[3] waiters: the waiter registry's deadlines (unused)
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] owner: the owner id
-- reply: int
--   1 when renewed, 0 when the owner no longer holds the lock.
local lock = KEYS[1]

if redis.call('hexists', lock, ARGV[2]) == 1 then
  redis.call('pexpire', lock, ARGV[1])
  return 1
end
return 0
