-- limiter_token_bucket: one rate-limit decision by a token bucket of
-- burst + 1 tokens refilled continuously at rate per period.
-- KEYS[1] config: the limiter's config hash
-- KEYS[2] state: a hash of tokens (a fraction), ts (when they were
--   counted, in microseconds of the Redis server clock) and ops (the
--   records of the last operations that wrote it, "<op>[@<at>],...", at
--   most 8, newest first; at: when a reservation's requests go ahead)
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
-- ARGV[10]? op: the operation id of a call that counts or refunds
--   (n ~= 0), '!' appended when the call may have run before (a resend):
--   a run that finds it recorded answers what the first run did (allowed,
--   going ahead at the same time; a refund: where the limiter stands) and
--   changes nothing. The record is a field of the HSET it does anyway
--   (no extra command); a refund that fills the bucket writes it (HSET
--   and PEXPIRE: one command more) where it would have deleted the state.
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
local op, resent = limiter_op(ARGV[10])

local b = redis.call('hmget', state, 'tokens', 'ts', 'ops')
local tokens, ts, ops = tonumber(b[1]), tonumber(b[2]), b[3] or ''
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
-- again, at most the idle TTL, and at least the records' lifetime.
local function ttl(ms)
  return limiter_ttl(ms, idle, op and limiter_record_ms or 1)
end
-- write stores the tokens with the records, op's in front.
local function write(at)
  if op then
    redis.call('hset', state, 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts), 'ops', limiter_record(ops, op, at))
  else
    redis.call('hset', state, 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
  end
  redis.call('pexpire', state, ttl(after(capacity) / 1000))
end
local function remaining()
  return math.max(0, math.floor(tokens + eps))
end
if resent then
  local found, at = limiter_find(ops, op)
  if found then
    if n > 0 and at and at > now then
      return {2, 0, at - now, after(capacity), now}
    end
    return {1, remaining(), 0, after(capacity), now}
  end
end
if n < 0 then
  tokens = math.min(capacity, tokens - n)
  if tokens + eps >= capacity and not op then
    redis.call('del', state)
  else
    write(nil)
  end
  return {1, remaining(), 0, after(capacity), now}
end
local wait = 0
if tokens + eps < n then
  wait = after(n)
  if wait > patience then
    return {0, remaining(), wait, after(capacity), now}
  end
end
if n > 0 then
  -- A reservation leaves the bucket in debt: negative tokens.
  tokens = tokens - n
  write(wait > 0 and now + wait or nil)
  redis.call('pexpire', cfg, ARGV[7], 'GT')
end
if wait > 0 then
  return {2, 0, wait, after(capacity), now}
end
return {1, remaining(), 0, after(capacity), now}
