-- reentrant_renew: extend the lease of a held reentrant (or fenced) lock.
-- KEYS[1] the lock: "<owner> <holds>[ <token>]"
-- ARGV[1] lease in milliseconds, ARGV[2] owner id
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
local lock = KEYS[1]
local prefix = ARGV[2] .. ' '

local value = redis.call('get', lock)
if value and string.sub(value, 1, #prefix) == prefix then
  redis.call('pexpire', lock, tonumber(ARGV[1]))
  return 1
end
return 0
