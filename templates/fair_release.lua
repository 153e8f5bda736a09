-- fair_release: give up one hold of a fair lock; on release, wake only the
-- first live waiter.
-- KEYS[1] the lock hash, KEYS[2] the wait queue, KEYS[3] the waiters' deadlines
-- ARGV[1] owner id, ARGV[2] lease in milliseconds, ARGV[3] channel prefix
-- Returns -1 when the owner does not hold the lock, the holds left when
-- still held (the lease is restarted), or 0 when released.
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local owner = ARGV[1]

if redis.call('hexists', lock, owner) == 0 then
  return -1
end
local holds = redis.call('hincrby', lock, owner, -1)
if holds > 0 then
  redis.call('pexpire', lock, tonumber(ARGV[2]))
  return holds
end
redis.call('del', lock)

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('zrangebyscore', deadlines, '-inf', now)
for _, w in ipairs(expired) do
  redis.call('lrem', queue, 1, w)
end
if #expired > 0 then
  redis.call('zremrangebyscore', deadlines, '-inf', now)
end
local head = redis.call('lindex', queue, 0)
if head then
  redis.call('publish', ARGV[3] .. ':' .. head, 'released')
end
return 0
