-- reentrant_acquire: take or re-enter a reentrant lock.
-- KEYS[1] the lock hash (field: owner, value: hold count)
-- ARGV[1] lease in milliseconds, ARGV[2] owner id
-- Returns {1, holds} when taken or re-entered, {0, pttl} when another owner holds it.
local lock = KEYS[1]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]

if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
  local holds = redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  return {1, holds}
end
return {0, redis.call('pttl', lock)}
