-- simple_acquire: take a non-reentrant lock (SET NX PX).
-- KEYS[1] the lock key (value: owner id)
-- ARGV[1] lease in milliseconds, ARGV[2] owner id
-- Returns {1, 1} when taken, {0, pttl} when another owner holds it, and
-- {-1, pttl} when this owner already holds it (a simple lock is not reentrant).
local lock = KEYS[1]
local owner = ARGV[2]

if redis.call('set', lock, owner, 'NX', 'PX', tonumber(ARGV[1])) then
  return {1, 1}
end
if redis.call('get', lock) == owner then
  return {-1, redis.call('pttl', lock)}
end
return {0, redis.call('pttl', lock)}
