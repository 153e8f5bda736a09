-- simple_renew: extend the lease of a held non-reentrant lock.
-- KEYS[1] the lock key (value: owner id[ w])
-- ARGV[1] lease in milliseconds, ARGV[2] owner id
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
local lock = KEYS[1]
local value = redis.call('get', lock)

if value == ARGV[2] or value == ARGV[2] .. ' w' then
  redis.call('pexpire', lock, tonumber(ARGV[1]))
  return 1
end
return 0
