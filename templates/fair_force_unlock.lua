-- fair_force_unlock: delete a fair lock whoever holds it, and wake the first
-- live waiter.
-- KEYS[1] the lock hash, KEYS[2] the wait queue, KEYS[3] the waiters' deadlines
-- ARGV[1] channel prefix
-- Returns 1 when a lock was deleted, 0 when it was not held.
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]

if redis.call('del', lock) == 0 then
  return 0
end
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
  redis.call('publish', ARGV[1] .. ':' .. head, 'released')
end
return 1
