-- semaphore_capacity: change a semaphore's capacity (an operator's call)
-- and wake every waiter, so that they retry or learn they ask too much.
-- KEYS[1] the capacity
-- ARGV[1] 'set', 'add' or 'reset', ARGV[2] the new capacity ('set') or the
-- change ('add'), ARGV[3] the spec's capacity, ARGV[4] wake-up channel,
-- ARGV[5] the publish command (publish or spublish)
-- 'set' and 'add' store the capacity without expiry; 'reset' deletes it, so
-- the spec's capacity applies again. Returns {1, new capacity}, or
-- {-1, capacity} when it would fall below 1 (nothing is changed).
local mode, v, default = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local capacity = tonumber(redis.call('get', KEYS[1])) or default
if mode == 'set' then
  capacity = v
elseif mode == 'add' then
  capacity = capacity + v
else
  capacity = default
end
if capacity < 1 then
  return {-1, capacity}
end
if mode == 'reset' then
  redis.call('del', KEYS[1])
else
  redis.call('set', KEYS[1], capacity)
end
redis.call(ARGV[5], ARGV[4], 'all')
return {1, capacity}
