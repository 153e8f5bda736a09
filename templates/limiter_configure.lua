-- limiter_configure: make the caller's config the limiter's, replacing the
-- one stored. The state is kept unless asked to reset it: each algorithm
-- reads it under the new config (never granting more than a full limiter
-- holds).
-- KEYS[1] config: the limiter's config hash
-- KEYS[2] state: its state (the caller's, for a per-client limiter)
-- ARGV[1] algorithm: the caller's algorithm
-- ARGV[2] rate: requests per period
-- ARGV[3] period_us: the period in microseconds
-- ARGV[4] burst: the burst
-- ARGV[5] scope: the scope
-- ARGV[6] config_ttl_ms: how long the config outlives the last write, in
--   milliseconds
-- ARGV[7] reset: '1' to reset the state (the limiter is full again), '0'
--   to keep it
-- reply: int
--   1 when the config changed, 0 when it was already the caller's.
local cfg = KEYS[1]
local s = redis.call('hmget', cfg, 'algorithm', 'rate', 'per', 'burst', 'scope')
local same = 1
for i = 1, 5 do
  if s[i] ~= ARGV[i] then
    same = 0
  end
end
redis.call('hset', cfg, 'algorithm', ARGV[1], 'rate', ARGV[2], 'per', ARGV[3], 'burst', ARGV[4], 'scope', ARGV[5])
if redis.call('pttl', cfg) < tonumber(ARGV[6]) then
  redis.call('pexpire', cfg, ARGV[6])
end
if ARGV[7] == '1' then
  redis.call('del', KEYS[2])
end
return 1 - same
