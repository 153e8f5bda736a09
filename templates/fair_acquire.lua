-- fair_acquire: take or re-enter a fair lock, first come first served.
-- KEYS[1] the lock hash (field: owner, value: hold count)
-- KEYS[2] the wait queue (a list of owner ids, in arrival order)
-- KEYS[3] the waiters' deadlines (a zset: owner id -> server time in ms by
--         which the waiter must call again or lose its place)
-- ARGV[1] lease in milliseconds, ARGV[2] owner id,
-- ARGV[3] waiter TTL in milliseconds: > 0 queues the owner (or refreshes its
--         place) when it cannot take the lock now; 0 only tries
-- ARGV[4] channel prefix: a waiter's wake-up channel is prefix:owner
-- Returns {1, holds} when taken or re-entered, or {0, ms}: how long the
-- caller may sleep before something can change without a message (the
-- holder's lease, or the deadline of the waiter that is first).
-- All times are the server's (TIME).
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]
local ttl = tonumber(ARGV[3])
local prefix = ARGV[4]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Evict the waiters whose deadline passed: they died or gave up.
local expired = redis.call('zrangebyscore', deadlines, '-inf', now)
for _, w in ipairs(expired) do
  redis.call('lrem', queue, 1, w)
end
if #expired > 0 then
  redis.call('zremrangebyscore', deadlines, '-inf', now)
end

if redis.call('hexists', lock, owner) == 1 then
  local holds = redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  return {1, holds}
end

local head = redis.call('lindex', queue, 0)
if redis.call('exists', lock) == 0 then
  if not head or head == owner then
    if head then
      redis.call('lpop', queue)
      redis.call('zrem', deadlines, owner)
    end
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {1, 1}
  end
  -- Free, but another waiter is first: make sure it is awake.
  redis.call('publish', prefix .. ':' .. head, 'free')
end

local wait = redis.call('pttl', lock)
if wait == -1 then
  wait = 1000 -- a key without a TTL that lockgen did not write
elseif wait < 0 then
  wait = tonumber(redis.call('zscore', deadlines, head) or now) - now
end

if ttl > 0 then
  if not redis.call('zscore', deadlines, owner) then
    redis.call('rpush', queue, owner)
  end
  redis.call('zadd', deadlines, now + ttl, owner)
  -- The queue lives as long as its last waiter's deadline.
  local last = redis.call('zrange', deadlines, -1, -1, 'withscores')
  local keep = tonumber(last[2]) - now
  redis.call('pexpire', queue, keep)
  redis.call('pexpire', deadlines, keep)
end
return {0, wait}
