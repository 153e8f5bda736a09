-- fair_renew: extend the lease of a held fair lock.
-- KEYS[1] the lock hash (field: owner, value: hold count)
-- ARGV[1] lease in milliseconds, ARGV[2] owner id
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
local lock = KEYS[1]

if redis.call('hexists', lock, ARGV[2]) == 1 then
  redis.call('pexpire', lock, tonumber(ARGV[1]))
  return 1
end
return 0
