-- reentrant_release: give up one hold of a reentrant (or fenced) lock.
-- KEYS[1] the lock: "<owner> <holds>[ <token>]"
-- ARGV[1] owner id, ARGV[2] lease in milliseconds, ARGV[3] wake-up channel
-- Returns -1 when the owner does not hold the lock, the holds left when
-- still held (the lease is restarted), or 0 when released; on release the
-- key is deleted and waiters are woken through the channel.
local lock = KEYS[1]
local owner = ARGV[1]

local value = redis.call('get', lock)
if not value then
  return -1
end
local holder, holds, rest = string.match(value, '^(%S+) (%d+)(.*)$')
if holder ~= owner then
  return -1
end
holds = tonumber(holds) - 1
if holds > 0 then
  redis.call('set', lock, owner .. ' ' .. holds .. rest, 'PX', tonumber(ARGV[2]))
  return holds
end
redis.call('del', lock)
redis.call('publish', ARGV[3], 'released')
return 0
