-- semaphore_acquire: take n permits of a semaphore as one hold, if free.
-- KEYS[1] the holds zset (member: owner id, score: expiry in server ms)
-- KEYS[2] the counts hash (field: owner id, value: its permits; field '*': permits held in all)
-- KEYS[3] the capacity, when an operator set one
-- ARGV[1] owner id, ARGV[2] permits wanted, ARGV[3] lease in milliseconds,
-- ARGV[4] the spec's capacity, used while KEYS[3] does not exist
-- Holds whose lease ran out are evicted first. Returns {1, free} when taken
-- (free: permits still free), {0, free, ms} when not enough are free (ms:
-- until the earliest hold expires, -1 if none), or {-1, capacity} when more
-- permits are wanted than the semaphore has.
local holds, counts = KEYS[1], KEYS[2]
local owner, n, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('zrangebyscore', holds, '-inf', now)
for _, o in ipairs(expired) do
  local k = tonumber(redis.call('hget', counts, o)) or 0
  redis.call('hdel', counts, o)
  redis.call('hincrby', counts, '*', -k)
end
if #expired > 0 then
  redis.call('zremrangebyscore', holds, '-inf', now)
end
if redis.call('zcard', holds) == 0 then
  redis.call('del', counts) -- nothing held, whatever the count says
end

local capacity = tonumber(redis.call('get', KEYS[3])) or tonumber(ARGV[4])
if n > capacity then
  return {-1, capacity}
end
local used = tonumber(redis.call('hget', counts, '*')) or 0
if capacity - used >= n then
  redis.call('zadd', holds, now + lease, owner)
  redis.call('hset', counts, owner, n)
  redis.call('hincrby', counts, '*', n)
  -- The keys live at least as long as their longest hold.
  for _, k in ipairs({holds, counts}) do
    if redis.call('pttl', k) < lease then
      redis.call('pexpire', k, lease)
    end
  end
  return {1, capacity - used - n}
end
local first = redis.call('zrange', holds, 0, 0, 'withscores')
if first[2] == nil then
  return {0, capacity - used, -1}
end
return {0, capacity - used, tonumber(first[2]) - now}
