-- limiter_gcra: one rate-limit decision by the generic cell rate algorithm.
-- KEYS[1] config: the limiter's config hash
-- KEYS[2] state: "<tat>[ <op>[@<at>],...]": the theoretical arrival time
--   (TAT) in microseconds of the Redis server clock, then the records of
--   the last operations that wrote it (at most 8, newest first; at: when
--   a reservation's requests go ahead)
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
--   changes nothing. The record is written in the SET of the TAT: no
--   extra command; a refund that fills the limiter SETs it (a record)
--   where it would have deleted it.
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
local interval = tonumber(ARGV[3]) / tonumber(ARGV[2]) -- us per request
local span = (tonumber(ARGV[4]) + 1) * interval        -- burst + 1 requests
local op, resent = limiter_op(ARGV[10])

local idle = tonumber(ARGV[9]) or 0
-- ttl is how long the state lives, in ms: until the limiter is full
-- again, at most the idle TTL, and at least the records' lifetime.
local function ttl(ms)
  return limiter_ttl(ms, idle, op and limiter_record_ms or 1)
end

local tat, ops = now, ''
local v = redis.call('get', state)
if v then
  local a, rest = string.match(v, '^(%d+) ?(.*)$')
  tat, ops = tonumber(a) or now, rest or ''
end
if tat < now then
  tat = now
end
-- write stores the TAT with the records, op's in front.
local function write(at)
  local value = string.format('%d', math.ceil(tat))
  if op then
    value = value .. ' ' .. limiter_record(ops, op, at)
  end
  redis.call('set', state, value, 'PX', ttl((tat - now) / 1000))
end
local function remaining()
  return math.max(0, math.floor((now + span - tat) / interval))
end
if resent then
  local found, at = limiter_find(ops, op)
  if found then
    if n > 0 and at and at > now then
      return {2, 0, at - now, math.ceil(tat - now), now}
    end
    return {1, remaining(), 0, math.ceil(tat - now), now}
  end
end
if n < 0 then
  tat = math.max(now, tat + n * interval)
  if tat > now or op then
    write(nil)
  else
    redis.call('del', state)
  end
  return {1, remaining(), 0, math.ceil(tat - now), now}
end
local wait = math.max(0, math.ceil(tat + n * interval - span - now))
if wait > patience then
  return {0, remaining(), wait, math.ceil(tat - now), now}
end
if n > 0 then
  -- Rounding the TAT up never lets more through than the rate.
  tat = math.ceil(tat + n * interval)
  write(wait > 0 and now + wait or nil)
  redis.call('pexpire', cfg, ARGV[7], 'GT')
end
if wait > 0 then
  return {2, 0, wait, math.ceil(tat - now), now}
end
return {1, remaining(), 0, math.ceil(tat - now), now}
