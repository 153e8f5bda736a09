-- simple_acquire: take a non-reentrant lock (SET NX PX); a caller that
-- cannot take it registers as a waiter in the same call.
-- KEYS[1] lock: the lock key (value: owner id, with " w" appended while
--   waiters are registered)
-- KEYS[2]? queue: the waiter registry's wait queue (a caller may pass
--   neither queue nor waiters)
-- KEYS[3]? waiters: the waiter registry's deadlines
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] owner: the owner id
-- ARGV[3]? registry_ttl_ms: how long a registration lasts (0: do not
--   register; absent: registry_ttl, the runtime's RegistryTTL)
-- ARGV[4]? registered: '1' when the owner is registered already (a woken
--   waiter), '2' when it only refreshes its entry unless the lock is free
--   or was handed to it (refresh in registry)
-- reply: int | {int, int}
--   1 when the free lock was taken by the fast path (an integer reply costs
--   Redis and the client less than a table); {1, 1} when taken, or found
--   handed to this waiter by a release (its lease is then extended to the
--   full lease); {0, pttl} when another owner holds it; {-1, pttl} when
--   this owner already holds it (a simple lock is not reentrant).
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
local waiting = ARGV[4] == '1' or ARGV[4] == '2'
local value
-- The uncontended fast path runs before the registry's functions are
-- defined. On Redis 7 its SET also answers the value that refused it
-- (NX with GET), which the attempt then need not read.
if not waiting then
  if redis.REDIS_VERSION_NUM then
    value = redis.call('set', lock, owner, 'NX', 'PX', lease, 'GET')
    if not value then
      return 1
    end
  elseif redis.call('set', lock, owner, 'NX', 'PX', lease) then
    return 1
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

if not value then
  value = redis.call('get', lock)
end
if not value then
  local v = owner
  if waiting then
    unregister(queue, waiters, owner)
    if redis.call('exists', queue) == 1 then
      v = v .. ' w'
    end
  end
  redis.call('set', lock, v, 'PX', lease)
  return {1, 1}
end
if string.match(value, '^%S+') == owner then
  if waiting then
    redis.call('pexpire', lock, lease)
    return {1, 1}
  end
  return {-1, redis.call('pttl', lock)}
end
if ttl ~= '0' then
  register(queue, waiters, owner, ttl, now_ms())
  if string.sub(value, -2) ~= ' w' then
    redis.call('set', lock, value .. ' w', 'KEEPTTL')
  end
end
return {0, redis.call('pttl', lock)}
