-- semaphore_release: give back the permits of one hold and wake waiters.
-- KEYS[1] the holds zset, KEYS[2] the counts hash
-- ARGV[1] owner id, ARGV[2] wake-up channel, ARGV[3] the publish command
-- (publish or spublish)
-- Returns the permits given back, or -1 when the owner holds none (released
-- already, or evicted after its lease ran out).
local holds, counts = KEYS[1], KEYS[2]
local owner = ARGV[1]

if redis.call('zrem', holds, owner) == 0 then
  return -1
end
local n = tonumber(redis.call('hget', counts, owner)) or 0
redis.call('hdel', counts, owner)
if redis.call('zcard', holds) == 0 then
  redis.call('del', counts)
else
  redis.call('hincrby', counts, '*', -n)
end
redis.call(ARGV[3], ARGV[2], 'released')
return n
