-- fair_leave: a waiter that gives up leaves a fair lock's queue; when it was
-- first and the lock is free, the next live waiter is woken in its place.
-- KEYS[1] the lock hash, KEYS[2] the wait queue, KEYS[3] the waiters' deadlines
-- ARGV[1] owner id, ARGV[2] channel prefix
-- Returns 1 when the owner was queued, 0 otherwise.
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local owner = ARGV[1]

local removed = redis.call('lrem', queue, 1, owner)
redis.call('zrem', deadlines, owner)
if removed == 0 or redis.call('exists', lock) == 1 then
  return removed
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
  redis.call('publish', ARGV[2] .. ':' .. head, 'free')
end
return 1
