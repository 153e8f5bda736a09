-- fenced_acquire: take or re-enter a fenced lock, a reentrant lock whose
-- every hold gets a fencing token.
-- KEYS[1] the lock hash (field: owner, value: hold count; field "token":
-- the hold's fencing token), KEYS[2] the fence counter (never expires)
-- ARGV[1] lease in milliseconds, ARGV[2] owner id
-- Returns {1, holds, token} when taken or re-entered (a re-entry keeps the
-- hold's token), {0, pttl} when another owner holds it.
-- Owner ids contain ':', so no owner is the field "token".
local lock, fence = KEYS[1], KEYS[2]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]

if redis.call('exists', lock) == 0 then
  local token = redis.call('incr', fence)
  redis.call('hset', lock, owner, 1, 'token', token)
  redis.call('pexpire', lock, lease)
  return {1, 1, token}
end
if redis.call('hexists', lock, owner) == 1 then
  local holds = redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  return {1, holds, tonumber(redis.call('hget', lock, 'token'))}
end
return {0, redis.call('pttl', lock)}
