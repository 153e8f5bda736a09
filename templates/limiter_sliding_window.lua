-- limiter_sliding_window: one rate-limit decision over an exact log of the
-- requests allowed in the last period: never more than rate of them in any
-- window of that length.
-- KEYS[1] config: the limiter's config hash, written on first use and by
--   limiter_configure, read when the config key is missing or about to
--   expire (see limiter_config)
-- KEYS[2] state: a sorted set of the allowed requests scored by their
--   time in microseconds of the Redis server clock, named after their
--   operation: "<op>" for the first of a call's requests, "<op>:<i>" for
--   the others
-- KEYS[3] cfgv: the config key, "<config>|<until_ms>[|<op>,...]": the
--   stored config, read on every call, then the records of the last
--   refunds (at most 8, newest first)
-- ARGV[1] config: the caller's "<algorithm> <rate> <period_us> <burst>
--   <scope>" (rate: requests per period, period_us: the period in
--   microseconds)
-- ARGV[2] n: the requests to count (0 only reports; a negative n refunds
--   -n requests: it forgets the -n latest entries of the log
--   (never more than it holds))
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
--   changes nothing. A call's requests are named after it (one ZADD for
--   all of them, no extra command); a resend of a counting call looks
--   for its first request (ZSCORE: one command more, on a resend only),
--   which is there while it is in the window; a refund records itself in
--   the config key (SET KEEPTTL: one command more; it reads the count it
--   left from ZPOPMAX's reply instead of a second ZCARD).
-- reply: {int, int, int, int, int} | {int, string, string, string, string, string}
--   {1 allowed | 2 allowed after the wait | 0 denied, remaining, retry
--   after us (the wait), reset after us, server time us}, or {-1,
--   algorithm, rate, period, burst, scope} as stored when the config in
--   Redis is not the caller's. A request allowed after a wait is counted
--   now, at the time it may go ahead: it reserves its place. A refund
--   replies {1, remaining, 0, reset after us, server time us}.
-- #include limiter
local cfg, state = KEYS[1], KEYS[2]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local config = ARGV[1]
local mismatch, refunds, untl = limiter_config(cfg, KEYS[3], redis.call('get', KEYS[3]), config,
  now / 1000, tonumber(ARGV[3]))
if mismatch then
  return mismatch
end

local limit, per = string.match(config, '^%S+ (%d+) (%d+)')
limit, per = tonumber(limit), tonumber(per)
local n = tonumber(ARGV[2])
local patience = tonumber(ARGV[4])
local op, resent = limiter_op(ARGV[6])

-- A resend looks for its record before the window moves on.
local found, first = false, nil
if resent and n > 0 then
  first = tonumber(redis.call('zscore', state, op))
  found = first ~= nil
elseif resent and n < 0 then
  found = limiter_find(refunds, op)
end

-- Entries at or before now - per have left the window for good; all the
-- others count, including those logged in the future by waiters.
redis.call('zremrangebyscore', state, '-inf', string.format('%d', now - per))
local count = redis.call('zcard', state)
local function reset()
  local last = redis.call('zrange', state, -1, -1, 'WITHSCORES')
  if last[2] == nil then
    return 0
  end
  return math.max(0, tonumber(last[2]) + per - now)
end
local idle = tonumber(ARGV[5]) or 0
-- ttl is how long the state lives, in ms: until the limiter is full
-- again, at most the idle TTL.
local function ttl(ms)
  return limiter_ttl(ms, idle, 1)
end
if found then
  if first and first > now then
    return {2, 0, first - now, reset(), now}
  end
  return {1, math.max(0, limit - count), 0, reset(), now}
end
if n < 0 then
  count = count - #redis.call('zpopmax', state, -n) / 2
  if op then
    -- The config key as limiter_config left it, with the refund's
    -- record in front of the others.
    local head = config .. '|' .. string.format('%d', untl)
    redis.call('set', KEYS[3], limiter_value(head, '|', refunds, 1, op, nil), 'KEEPTTL')
  end
  local left = reset()
  if left > 0 then
    redis.call('pexpire', state, ttl(left / 1000))
  end
  return {1, math.max(0, limit - count), 0, left, now}
end
-- A request waiting its turn is logged at the time it may go ahead, so
-- the log may hold entries in the future; they count from now on.
local at = now
if count + n > limit then
  -- Allowed once the oldest entries that are too many have left the window.
  local i = count + n - limit - 1
  local e = redis.call('zrange', state, i, i, 'WITHSCORES')
  at = math.max(now + 1, tonumber(e[2]) + per)
  if at - now > patience then
    return {0, math.max(0, limit - count), at - now, reset(), now}
  end
end
if n > 0 and op then
  -- One ZADD per 1000 requests (unpack's stack).
  local score = string.format('%d', at)
  local add = {'zadd', state, 'NX', score, op}
  for i = 2, n do
    if #add >= 2003 then
      redis.call(unpack(add))
      add = {'zadd', state, 'NX'}
    end
    add[#add + 1] = score
    add[#add + 1] = op .. ':' .. i
  end
  redis.call(unpack(add))
else
  for i = 1, n do
    local member = string.format('%d:%d', at, count + i)
    while redis.call('zadd', state, 'NX', string.format('%d', at), member) == 0 do
      member = member .. '+'
    end
  end
end
local left = reset()
if n > 0 then
  redis.call('pexpire', state, ttl(left / 1000))
end
if at > now then
  return {2, 0, at - now, left, now}
end
return {1, math.max(0, limit - count - n), 0, left, now}
