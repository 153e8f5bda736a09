-- simple_release: compare-and-delete a non-reentrant lock.
-- KEYS[1] the lock key
-- ARGV[1] owner id, ARGV[2] lease in milliseconds (unused: a simple lock has
-- one hold), ARGV[3] wake-up channel
-- Returns -1 when the owner does not hold the lock, 0 when released.
local lock = KEYS[1]

if redis.call('get', lock) ~= ARGV[1] then
  return -1
end
redis.call('del', lock)
redis.call('publish', ARGV[3], 'released')
return 0
