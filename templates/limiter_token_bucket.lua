-- limiter_token_bucket: one rate-limit decision by a token bucket of
-- burst + 1 tokens refilled continuously at rate per period.
-- KEYS[1] config: the limiter's config hash, written on first use and by
--   limiter_configure, read when the config key is missing or about to
--   expire (see limiter_config)
-- KEYS[2] state: "<tokens> <ts>[ <op>[@<at>],...]": the tokens (a
--   fraction), when they were counted (microseconds of the Redis server
--   clock), then the records of the last operations that wrote it (at
--   most 8, newest first; at: when a reservation's requests go ahead).
--   A state of the hash form of earlier versions reads as missing (a
--   full bucket) and is replaced.
-- KEYS[3] cfgv: the config key, "<config>|<until_ms>": the stored
--   config, read with the state in one MGET on every call
-- ARGV[1] config: the caller's "<algorithm> <rate> <period_us> <burst>
--   <scope>" (rate: requests per period, period_us: the period in
--   microseconds)
-- ARGV[2] n: the requests to count (0 only reports; a negative n refunds
--   -n requests: gives them back to the limiter, never above
--   what a full limiter allows)
-- ARGV[3] config_ttl_ms: how long the config outlives the last write, at
--   least, in milliseconds
-- ARGV[4] patience_us: how long the caller would wait, in microseconds (0:
--   not at all)
-- ARGV[5] idle_ttl_ms: the most the state outlives the last request
--   counted, in milliseconds (0: until the limiter is full again)
-- ARGV[6]? op: the operation id of a call that counts or refunds
--   (n ~= 0), '!' appended when the call may have run before (a resend):
--   a run that finds it recorded answers what the first run did (allowed,
--   going ahead at the same time; a refund: where the limiter stands) and
--   changes nothing. The record is written in the SET of the tokens: no
--   extra command; a refund that fills the bucket SETs it (a record)
--   where it would have deleted it.
-- reply: {int, int, int, int, int} | {int, string, string, string, string, string}
--   {1 allowed | 2 allowed after the wait | 0 denied, remaining, retry
--   after us (the wait), reset after us, server time us}, or {-1,
--   algorithm, rate, period, burst, scope} as stored when the config in
--   Redis is not the caller's. A request allowed after a wait is counted
--   now, at the time it may go ahead: it reserves its place. A refund
--   replies {1, remaining, 0, reset after us, server time us}.
-- #include limiter
local state = KEYS[2]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local config = ARGV[1]
local got = redis.call('mget', KEYS[3], state)
local mismatch = limiter_config(KEYS[1], KEYS[3], got[1], config, now / 1000, tonumber(ARGV[3]))
if mismatch then
  return mismatch
end

-- Lua reads a number out of a string in arithmetic.
local rate, per, burst = string.match(config, '^%S+ (%d+) (%d+) (%d+)')
local n = tonumber(ARGV[2])
local interval = per / rate -- us per token
local capacity = burst + 1
local op, resent = limiter_op(ARGV[6])
-- The state's lifetime, in ms: until the limiter is full again, at most
-- the idle TTL, and at least the records' lifetime.
local idle, floor = tonumber(ARGV[5]) or 0, op and limiter_record_ms or 1

local v = got[2]
local tokens, ts, from -- from: where the records start
if v then
  local sp = string.find(v, ' ', 1, true)
  if sp then
    local sp2 = string.find(v, ' ', sp + 1, true)
    tokens = tonumber(string.sub(v, 1, sp - 1))
    ts = tonumber(string.sub(v, sp + 1, sp2 and sp2 - 1 or -1))
    from = sp2 and sp2 + 1
  end
end
if tokens == nil or ts == nil then
  tokens, ts, from = capacity, now, nil
elseif now > ts then
  tokens = math.min(capacity, tokens + (now - ts) / interval)
  ts = now
end
-- Float sums may leave a whole token a hair short.
local eps = 1e-9
-- full: us until the bucket holds capacity tokens.
local full = math.max(0, math.ceil((capacity - tokens) * interval - eps))
if resent then
  local found, at = limiter_find(from and string.sub(v, from) or '', op)
  if found then
    if n > 0 and at and at > now then
      return {2, 0, at - now, full, now}
    end
    return {1, math.max(0, math.floor(tokens + eps)), 0, full, now}
  end
end
if n < 0 then
  tokens = math.min(capacity, tokens - n)
  full = math.max(0, math.ceil((capacity - tokens) * interval - eps))
  if tokens + eps >= capacity and not op then
    redis.call('del', state)
  else
    -- A refund that fills the bucket keeps its record where it would
    -- delete the state.
    local head = string.format('%.17g %d', tokens, ts)
    redis.call('set', state, op and limiter_value(head, ' ', v, from, op, nil) or head,
      'PX', limiter_ttl(full / 1000, idle, floor))
  end
  return {1, math.max(0, math.floor(tokens + eps)), 0, full, now}
end
local wait = 0
if tokens + eps < n then
  wait = math.max(0, math.ceil((n - tokens) * interval - eps))
  if wait > tonumber(ARGV[4]) then
    return {0, math.max(0, math.floor(tokens + eps)), wait, full, now}
  end
end
if n > 0 then
  -- A reservation leaves the bucket in debt: negative tokens. The tokens
  -- are written with the records, op's in front.
  tokens = tokens - n
  full = math.max(0, math.ceil((capacity - tokens) * interval - eps))
  local head = string.format('%.17g %d', tokens, ts)
  local value = head
  if op then
    value = limiter_value(head, ' ', v, from, op, wait > 0 and now + wait or nil)
  end
  redis.call('set', state, value, 'PX', limiter_ttl(full / 1000, idle, floor))
end
if wait > 0 then
  return {2, 0, wait, full, now}
end
return {1, math.max(0, math.floor(tokens + eps)), 0, full, now}
