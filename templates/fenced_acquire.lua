-- fenced_acquire: take or re-enter a fenced lock, a reentrant lock whose
-- every hold gets a fencing token; a caller that cannot take it registers
-- as a waiter in the same call.
-- KEYS[1] lock: "<owner> <holds> <token>", with " w" appended while
--   waiters are registered
-- KEYS[2] queue: the waiter registry's wait queue
-- KEYS[3] waiters: the waiter registry's deadlines
-- KEYS[4] fence: the fence counter (never expires)
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] owner: the owner id
-- ARGV[3]? registry_ttl_ms: how long a registration lasts (0: do not
--   register; absent: registry_ttl, the runtime's RegistryTTL)
-- ARGV[4]? registered: '1' when the owner is registered already, '2' to
--   refresh its entry unless the lock is free or was handed to it; '0' or
--   absent otherwise (a first attempt leaves it out)
-- ARGV[5]? op: a re-entry's operation id; absent for a new owner (see
--   reentrant_acquire: a call that ran already answers its hold)
-- reply: int | {int, int, int} | {int, int}
--   token when the fast path took the free lock (one hold: an integer
--   costs Redis and the client less than a table); {1, holds, token}
--   when taken, re-entered (a re-entry keeps the hold's
--   token) or found handed to this waiter; {0, pttl} when another owner
--   holds it.
local lock, fence = KEYS[1], KEYS[4]
local lease, owner = ARGV[1], ARGV[2]
local waiting = ARGV[4] == '1' or ARGV[4] == '2'
local value
-- The uncontended fast path runs before the registry's functions are defined.
if not waiting then
  value = redis.call('get', lock)
  if not value then
    local token = redis.call('incr', fence)
    redis.call('set', lock, owner .. ' 1 ' .. token, 'PX', lease)
    return token
  end
end
-- #include registry
local queue, waiters, ttl = KEYS[2], KEYS[3], ARGV[3] or registry_ttl

if ARGV[4] == '2' then
  local pttl = refresh(lock, queue, waiters, owner, ttl)
  if pttl then
    return {0, pttl}
  end
end

if waiting then
  value = redis.call('get', lock)
end
if not value then
  local token = redis.call('incr', fence)
  local v = owner .. ' 1 ' .. token
  if waiting then
    unregister(queue, waiters, owner)
    if redis.call('exists', queue) == 1 then
      v = v .. ' w'
    end
  end
  redis.call('set', lock, v, 'PX', lease)
  return {1, 1, token}
end
local holder, holds, rest = hold_of(value)
local token = tonumber(string.match(rest, '^ (%d+)'))
if holder == owner then
  if waiting then
    redis.call('pexpire', lock, lease)
    return {1, holds, token}
  end
  local op = ARGV[5]
  if not op or has_op(rest, op) then
    -- This call ran already (its reply was lost), or a release handed the
    -- lock to this new owner meanwhile: the lease from now, as that run's.
    redis.call('pexpire', lock, lease)
    return {1, holds, token}
  end
  holds = holds + 1
  redis.call('set', lock, owner .. ' ' .. holds .. with_op(rest, op), 'PX', lease)
  return {1, holds, token}
end
if ttl ~= '0' then
  register(queue, waiters, owner, ttl, now_ms())
  if string.sub(rest, -2) ~= ' w' then
    redis.call('set', lock, value .. ' w', 'KEEPTTL')
  end
end
return {0, redis.call('pttl', lock)}
