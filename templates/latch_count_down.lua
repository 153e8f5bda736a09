-- latch_count_down: count a latch down by one; the last count-down opens it
-- and wakes every waiter.
-- KEYS[1] count: the latch's count
-- ARGV[1] spec_count: the spec's count, used while the latch is not set
-- ARGV[2] expire_ms: expiry in milliseconds of a latch set here
-- ARGV[3] channel: the wake-up channel
-- ARGV[4] publish: the publish command (publish or spublish)
-- reply: int
--   The count left. An open latch (0) stays open until it expires.
local count = tonumber(redis.call('get', KEYS[1]))
if count == nil then
  count = tonumber(ARGV[1])
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
end
if count <= 0 then
  return 0
end
count = redis.call('decr', KEYS[1])
if count == 0 then
  redis.call(ARGV[4], ARGV[3], 'all')
end
return count
