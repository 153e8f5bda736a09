-- limiter_token_bucket: one rate-limit decision by a token bucket of
-- burst + 1 tokens refilled continuously at rate per period.
-- KEYS[1] config: the limiter's config hash
-- KEYS[2] state: a hash of tokens (a fraction) and ts (when they were
--   counted, in microseconds of the Redis server clock)
-- ARGV[1] algorithm: the caller's algorithm
-- ARGV[2] rate: requests per period
-- ARGV[3] period_us: the period in microseconds
-- ARGV[4] burst: the burst
-- ARGV[5] scope: the scope
-- ARGV[6] n: the requests to count (0 only reports; a negative n refunds
--   -n requests: gives them back to the limiter, never above
--   what a full limiter allows)
-- ARGV[7] config_ttl_ms: how long the config outlives the last write, in
--   milliseconds
-- ARGV[8] patience_us: how long the caller would wait, in microseconds (0:
--   not at all)
-- ARGV[9] idle_ttl_ms: the most the state outlives the last request
--   counted, in milliseconds (0: until the limiter is full again)
-- reply: {int, int, int, int, int} | {int, string, string, string, string, string}
--   {1 allowed | 2 allowed after the wait | 0 denied, remaining, retry
--   after us (the wait), reset after us, server time us}, or {-1,
--   algorithm, rate, period, burst, scope} as stored when the config in
--   Redis is not the caller's. A request allowed after a wait is counted
--   now, at the time it may go ahead: it reserves its place. A refund
--   replies {1, remaining, 0, reset after us, server time us}.
-- #include limiter
local cfg, state = KEYS[1], KEYS[2]
local mismatch = limiter_config(cfg, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[7])
if mismatch then
  return mismatch
end

local t = redis.call('time')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[6])
local patience = tonumber(ARGV[8])
local interval = tonumber(ARGV[3]) / tonumber(ARGV[2]) -- us per token
local capacity = tonumber(ARGV[4]) + 1

local b = redis.call('hmget', state, 'tokens', 'ts')
local tokens, ts = tonumber(b[1]), tonumber(b[2])
if tokens == nil or ts == nil then
  tokens, ts = capacity, now
elseif now > ts then
  tokens = math.min(capacity, tokens + (now - ts) / interval)
  ts = now
end
-- Float sums may leave a whole token a hair short.
local eps = 1e-9
local function after(want) -- us until the bucket holds want tokens
  return math.max(0, math.ceil((want - tokens) * interval - eps))
end
local idle = tonumber(ARGV[9]) or 0
-- ttl is how long the state lives, in ms: until the limiter is full
-- again, at most the idle TTL.
local function ttl(ms)
  return limiter_ttl(ms, idle)
end
if n < 0 then
  tokens = math.min(capacity, tokens - n)
  if tokens + eps >= capacity then
    redis.call('del', state)
  else
    redis.call('hset', state, 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
    redis.call('pexpire', state, ttl(after(capacity) / 1000))
  end
  return {1, math.max(0, math.floor(tokens + eps)), 0, after(capacity), now}
end
local wait = 0
if tokens + eps < n then
  wait = after(n)
  if wait > patience then
    return {0, math.max(0, math.floor(tokens + eps)), wait, after(capacity), now}
  end
end
if n > 0 then
  -- A reservation leaves the bucket in debt: negative tokens.
  tokens = tokens - n
  redis.call('hset', state, 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
  redis.call('pexpire', state, ttl(after(capacity) / 1000))
  redis.call('pexpire', cfg, ARGV[7], 'GT')
end
if wait > 0 then
  return {2, 0, wait, after(capacity), now}
end
return {1, math.max(0, math.floor(tokens + eps)), 0, after(capacity), now}
