-- rw_release: give up one hold of one side of a read-write lock.
-- KEYS[1] the lock hash, KEYS[2] the holds' deadlines (see rw_acquire)
-- ARGV[1] owner id, ARGV[2] lease in milliseconds, ARGV[3] wake-up channel,
-- ARGV[4] side: r or w, ARGV[5] the publish command (publish or spublish)
-- Returns -1 when the owner does not hold that side, the holds left when
-- still held (the hold's lease is restarted), or 0 when released. When
-- the write side is released, or the last hold of any side, every waiter
-- is woken ("all"): waiting readers proceed together, writers race.
local lock, deadlines = KEYS[1], KEYS[2]
local owner, lease, side = ARGV[1], tonumber(ARGV[2]), ARGV[4]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local expired = redis.call('zrangebyscore', deadlines, '-inf', now)
for _, m in ipairs(expired) do
  if m == 'w' then
    redis.call('hdel', lock, 'writer', 'writes')
  else
    redis.call('hdel', lock, m)
  end
end
if #expired > 0 then
  redis.call('zremrangebyscore', deadlines, '-inf', now)
end

local field, member
if side == 'w' then
  if redis.call('hget', lock, 'writer') ~= owner then
    return -1
  end
  field, member = 'writes', 'w'
else
  field = 'r:' .. owner
  member = field
  if redis.call('hexists', lock, field) == 0 then
    return -1
  end
end

local holds = redis.call('hincrby', lock, field, -1)
if holds > 0 then
  redis.call('zadd', deadlines, now + lease, member)
else
  redis.call('hdel', lock, field)
  if side == 'w' then
    redis.call('hdel', lock, 'writer')
  end
  redis.call('zrem', deadlines, member)
end

local last = redis.call('zrange', deadlines, -1, -1, 'withscores')
if #last == 0 then
  redis.call('del', lock, deadlines)
else
  local keep = tonumber(last[2]) - now
  redis.call('pexpire', lock, keep)
  redis.call('pexpire', deadlines, keep)
end
if holds <= 0 and (side == 'w' or #last == 0) then
  redis.call(ARGV[5], ARGV[3], 'all')
end
if holds > 0 then
  return holds
end
return 0
