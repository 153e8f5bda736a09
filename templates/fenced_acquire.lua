-- fenced_acquire: take or re-enter a fenced lock, a reentrant lock whose
-- every hold gets a fencing token.
-- KEYS[1] the lock: "<owner> <holds> <token>", KEYS[2] the fence counter
-- (never expires)
-- ARGV[1] lease in milliseconds, ARGV[2] owner id
-- Returns {1, holds, token} when taken or re-entered (a re-entry keeps the
-- hold's token), {0, pttl} when another owner holds it.
local lock, fence = KEYS[1], KEYS[2]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]

local value = redis.call('get', lock)
if not value then
  local token = redis.call('incr', fence)
  redis.call('set', lock, owner .. ' 1 ' .. token, 'PX', lease)
  return {1, 1, token}
end
local holder, holds, token = string.match(value, '^(%S+) (%d+) (%d+)$')
if holder == owner then
  holds = tonumber(holds) + 1
  redis.call('set', lock, owner .. ' ' .. holds .. ' ' .. token, 'PX', lease)
  return {1, holds, tonumber(token)}
end
return {0, redis.call('pttl', lock)}
