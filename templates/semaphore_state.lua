-- semaphore_state: a semaphore's capacity and the permits held, after
-- evicting the holds whose lease ran out.
-- KEYS[1] the holds zset, KEYS[2] the counts hash, KEYS[3] the capacity
-- ARGV[1] the spec's capacity, used while KEYS[3] does not exist
-- Returns {capacity, held}.
local holds, counts = KEYS[1], KEYS[2]

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
local used = tonumber(redis.call('hget', counts, '*')) or 0
return {tonumber(redis.call('get', KEYS[3])) or tonumber(ARGV[1]), used}
