-- rw_acquire: take or re-enter one side of a read-write lock.
-- KEYS[1] the lock hash: "writer" -> the write holder's owner id, "writes"
--         -> its hold count, "r:<owner>" -> a reader's hold count
-- KEYS[2] the holds' deadlines (a zset: "w" for the write hold, "r:<owner>"
--         per reader -> server time in ms when that hold's lease runs out),
--         so a dead reader's share runs out alone
-- ARGV[1] lease in milliseconds, ARGV[2] owner id, ARGV[3] side: r or w
-- Returns {1, holds} when taken or re-entered; {0, ms} when the caller must
-- wait, ms being when the first hold in its way runs out; {-2, 0} when a
-- reader asks for the write side (an upgrade, refused: two upgrading
-- readers would wait for each other forever).
-- Readers share; the writer excludes everyone but itself, and may take the
-- read side too (to downgrade: then release the write side).
local lock, deadlines = KEYS[1], KEYS[2]
local lease, owner, side = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Drop the holds whose lease ran out: their holders died.
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

-- take records a hold and keeps both keys as long as the last hold.
local function take(field, member)
  local holds = redis.call('hincrby', lock, field, 1)
  redis.call('zadd', deadlines, now + lease, member)
  local last = redis.call('zrange', deadlines, -1, -1, 'withscores')
  local keep = tonumber(last[2]) - now
  redis.call('pexpire', lock, keep)
  redis.call('pexpire', deadlines, keep)
  return holds
end

local writer = redis.call('hget', lock, 'writer')
local reader = 'r:' .. owner
if side == 'r' then
  if writer and writer ~= owner then
    return {0, tonumber(redis.call('zscore', deadlines, 'w') or now) - now}
  end
  return {1, take(reader, reader)}
elseif side == 'w' then
  if writer == owner then
    return {1, take('writes', 'w')}
  end
  if redis.call('hexists', lock, reader) == 1 then
    return {-2, 0}
  end
  if writer then
    return {0, tonumber(redis.call('zscore', deadlines, 'w') or now) - now}
  end
  local first = redis.call('zrange', deadlines, 0, 0, 'withscores')
  if #first > 0 then
    return {0, tonumber(first[2]) - now}
  end
  redis.call('hset', lock, 'writer', owner)
  return {1, take('writes', 'w')}
end
return redis.error_reply('lockgen: the side of a read-write lock is r or w, not ' .. tostring(side))
