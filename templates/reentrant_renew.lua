-- reentrant_renew: extend the lease of a held reentrant (or fenced) lock.
-- KEYS[1] lock: "<owner> <holds>[ <token>]", a single hold "<owner>"
-- KEYS[2] queue: the waiter registry's wait queue (unused)
-- KEYS[3] waiters: the waiter registry's deadlines (unused)
-- KEYS[4]? fence: a fenced lock's fence counter (unused)
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] owner: the owner id
-- reply: int
--   1 when renewed, 0 when the owner no longer holds the lock.
local lock = KEYS[1]
local prefix = ARGV[2] .. ' '

local value = redis.call('get', lock)
if value == ARGV[2] or value and string.sub(value, 1, #prefix) == prefix then
  redis.call('pexpire', lock, ARGV[1])
  return 1
end
return 0
