-- limiter_configure: make the caller's config the limiter's, replacing the
-- one stored (with if_exists, only when one is stored: a limiter without
-- a config is left without one, and nothing is written). The state is
-- kept unless asked to reset it: each algorithm reads it under the new
-- config (never granting more than a full limiter holds). The call's
-- operation id and reply are kept in the config (field 'reconf', in the
-- HSET it makes anyway), so that a second run of the call answers what
-- the first did and changes nothing.
-- KEYS[1] config: the limiter's config hash
-- KEYS[2] state: its state (the caller's, for a per-client limiter)
-- KEYS[3] cfgv: the config key, "<config>|<until_ms>[|<ops>]", the copy
--   of the config the decision scripts read (see limiter_config): written
--   with the hash, keeping its records (ops)
-- ARGV[1] algorithm: the caller's algorithm
-- ARGV[2] rate: requests per period
-- ARGV[3] period_us: the period in microseconds
-- ARGV[4] burst: the burst
-- ARGV[5] scope: the scope
-- ARGV[6] config_ttl_ms: how long the config outlives the last write, in
--   milliseconds: the hash and the config key live that plus a minute
--   (limiter_config_refresh) from this call, the hash at least
-- ARGV[7] reset: '1' to reset the state (the limiter is full again), '0'
--   to keep it
-- ARGV[8] if_exists: '1' to change only a stored config, '0' to store
--   the caller's in any case
-- ARGV[9] op: the call's operation id (unique across clients), with '!'
--   appended when the call is sent again (go-redis writes it so: a lost
--   reply, a redirect, the EVAL after NOSCRIPT); only then is the record
--   read
-- reply: int
--   1 when the config changed, 0 when it was already the caller's, -1
--   when if_exists found no config (nothing was written). A run whose
--   record is there answers the recorded reply. A resent call that found
--   no config on its first run may find one its second run: that run is
--   then the call's one effect.
-- #include limiter
local cfg = KEYS[1]
local op = ARGV[9]
local s = redis.call('hmget', cfg, 'algorithm', 'rate', 'per', 'burst', 'scope', 'reconf')
if string.sub(op, -1) == '!' then -- it may have run: answer as it did
  op = string.sub(op, 1, -2)
  local r, id = string.match(s[6] or '', '^(%-?%d+) (.*)$')
  if id == op then
    return tonumber(r)
  end
end
if ARGV[8] == '1' and not s[1] then
  return -1
end
local same = 1
for i = 1, 5 do
  if s[i] ~= ARGV[i] then
    same = 0
  end
end
redis.call('hset', cfg, 'algorithm', ARGV[1], 'rate', ARGV[2], 'per', ARGV[3], 'burst', ARGV[4], 'scope', ARGV[5],
  'reconf', (1 - same) .. ' ' .. op)
local ttl = tonumber(ARGV[6]) + limiter_config_refresh
if redis.call('pttl', cfg) < ttl then
  redis.call('pexpire', cfg, ttl)
end
local t = redis.call('time')
local head = table.concat({ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]}, ' ') .. '|'
  .. string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl)
local ops = string.match(redis.call('get', KEYS[3]) or '', '^[^|]*|%d+|(.+)$')
if ops then
  head = head .. '|' .. ops
end
redis.call('set', KEYS[3], head, 'PX', ttl)
if ARGV[7] == '1' then
  redis.call('del', KEYS[2])
end
return 1 - same
