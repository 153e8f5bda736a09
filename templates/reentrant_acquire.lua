-- reentrant_acquire: take or re-enter a reentrant lock.
-- KEYS[1] the lock: a string "<owner> <holds>" (a fenced lock appends
-- " <token>"), so that taking a free lock is one SET NX PX
-- ARGV[1] lease in milliseconds, ARGV[2] owner id
-- Returns {1, holds} when taken or re-entered, {0, pttl} when another owner holds it.
local lock = KEYS[1]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]

if redis.call('set', lock, owner .. ' 1', 'NX', 'PX', lease) then
  return {1, 1}
end
local holder, holds, rest = string.match(redis.call('get', lock), '^(%S+) (%d+)(.*)$')
if holder == owner then
  holds = tonumber(holds) + 1
  redis.call('set', lock, owner .. ' ' .. holds .. rest, 'PX', lease)
  return {1, holds}
end
return {0, redis.call('pttl', lock)}
