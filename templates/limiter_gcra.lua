-- limiter_gcra: one rate-limit decision by the generic cell rate algorithm.
-- KEYS[1] config: the limiter's config hash, written on first use and by
--   limiter_configure, read when the config key is missing or about to
--   expire (see limiter_config)
-- KEYS[2] state: "<tat>[ <op>[@<at>],...]": the theoretical arrival time
--   (TAT) in microseconds of the Redis server clock, then the records of
--   the last operations that wrote it (at most 8, newest first; at: when
--   a reservation's requests go ahead)
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
local interval = per / rate         -- us per request
local span = (burst + 1) * interval -- burst + 1 requests
local op, resent = limiter_op(ARGV[6])
-- The state's lifetime, in ms: until the limiter is full again, at most
-- the idle TTL, and at least the records' lifetime.
local idle, floor = tonumber(ARGV[5]) or 0, op and limiter_record_ms or 1

local v = got[2]
local tat, sp = now, nil -- sp: the space before the records
if v then
  sp = string.find(v, ' ', 1, true)
  tat = tonumber(sp and string.sub(v, 1, sp - 1) or v) or now
  if tat < now then
    tat = now
  end
end
if resent then
  local found, at = limiter_find(sp and string.sub(v, sp + 1) or '', op)
  if found then
    if n > 0 and at and at > now then
      return {2, 0, at - now, math.ceil(tat - now), now}
    end
    return {1, math.max(0, math.floor((now + span - tat) / interval)), 0, math.ceil(tat - now),
      now}
  end
end
if n < 0 then
  tat = math.max(now, tat + n * interval)
  if tat > now or op then
    -- A refund that fills the limiter keeps its record where it would
    -- delete the state.
    local head = string.format('%d', math.ceil(tat))
    redis.call('set', state, op and limiter_value(head, ' ', v, sp and sp + 1, op, nil) or head,
      'PX', limiter_ttl((tat - now) / 1000, idle, floor))
  else
    redis.call('del', state)
  end
  return {1, math.max(0, math.floor((now + span - tat) / interval)), 0, math.ceil(tat - now), now}
end
local wait = math.max(0, math.ceil(tat + n * interval - span - now))
if wait > tonumber(ARGV[4]) then
  return {0, math.max(0, math.floor((now + span - tat) / interval)), wait, math.ceil(tat - now), now}
end
if n > 0 then
  -- Rounding the TAT up never lets more through than the rate. The TAT
  -- is written with the records, op's in front.
  tat = math.ceil(tat + n * interval)
  local head = string.format('%d', tat)
  local value = head
  if op then
    value = limiter_value(head, ' ', v, sp and sp + 1, op, wait > 0 and now + wait or nil)
  end
  redis.call('set', state, value, 'PX', limiter_ttl((tat - now) / 1000, idle, floor))
end
if wait > 0 then
  return {2, 0, wait, math.ceil(tat - now), now}
end
return {1, math.max(0, math.floor((now + span - tat) / interval)), 0, math.ceil(tat - now), now}
