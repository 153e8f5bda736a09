-- semaphore_acquire: take n permits of a semaphore as one hold, if free;
-- a caller that must wait registers as a waiter in the same call. Holds
-- whose lease ran out are evicted first. While waiters are registered, a
-- newcomer does not pass one that the free permits do not satisfy.
-- KEYS[1] holds: the holds (a zset: owner -> expiry in server ms)
-- KEYS[2] counts: the counts (a hash: owner -> its permits, '*' -> permits
--   held in all, 'q' -> 1 while waiters may be registered, 'c' -> the
--   capacity key's value cached, 0 for none). A single hold taken by the
--   fast path (nothing held, nobody registered) is the counts alone, with
--   's' -> its owner and the hold's lease as the key's TTL, and no holds
--   key: see sem_used, which turns it into the full form
-- KEYS[3] capacity: the capacity, when an operator set one
-- KEYS[4] queue: the waiter registry's wait queue (members "<owner> <n>")
-- KEYS[5] waiters: the waiter registry's deadlines
-- ARGV[1] owner: the owner id
-- ARGV[2] n: the permits wanted ('*': every free permit, a drain, which
--   never waits)
-- ARGV[3] lease_ms: the lease in milliseconds
-- ARGV[4] spec_capacity: the spec's capacity, used while KEYS[3] does not
--   exist
-- ARGV[5] registry_ttl_ms: how long a registration lasts (0: do not
--   register)
-- ARGV[6] registered: '1' when the owner is registered already (a woken
--   waiter), '2' when it is registered and only refreshes its entry while
--   a live hold is left, no registered waiter is past its deadline and the
--   capacity allows its request, '3' for a first attempt that skips the
--   uncontended check (its client found the semaphore contended lately),
--   else '0'
-- ARGV[7] prefix: the wake-up channel prefix
-- ARGV[8] publish: the publish command (publish or spublish)
-- ARGV[9] handoff_ms: the hand-off lease in milliseconds
-- ARGV[10]? wait_capacity: '1' when a request above the capacity waits
--   for it to grow instead of failing; '0' or absent otherwise (left out:
--   one argument less)
-- reply: int | {int, int, int} | {int, int}
--   1 when the fast path took the one permit asked for: nothing was held
--   and nobody registered (an integer costs less than a table); {1, free,
--   n} when taken, found handed to this waiter by a release or
--   found taken by an earlier run of this call (its hold then gets the
--   full lease; free: permits still free, n: permits taken), {0, free, ms} when not (ms: until the earliest hold
--   expires, -1 if none; free is 0 after a refresh that only moved the
--   entry's deadline), or {-1, capacity} when more permits are wanted
--   than the semaphore has.
local holds, counts = KEYS[1], KEYS[2]
-- The uncontended fast path runs before the registry's functions are
-- defined: a first attempt for one permit (never above the capacity,
-- which is at least 1) while nothing is held and nobody is registered
-- (neither key exists) takes it as the compact single hold, without TIME
-- or the holds key. A second run of this call finds its hold below.
if ARGV[2] == '1' and ARGV[6] == '0' and redis.call('exists', holds, counts) == 0 then
  redis.call('hset', counts, 's', ARGV[1], ARGV[1], '1', '*', '1')
  redis.call('pexpire', counts, ARGV[3])
  return 1
end
-- #include registry
-- #include sem
local queue, waiters = KEYS[4], KEYS[5]
local owner, lease = ARGV[1], ARGV[3]
local ttl, waiting, handoff = ARGV[5], ARGV[6] == '1' or ARGV[6] == '2', ARGV[9]
local member = owner .. ' ' .. ARGV[2]
local now = now_ms()

if ARGV[6] == '2' then
  -- A refresh: while a live hold is left (its release or its expiry
  -- changes what is free) and nobody registered is dead (a dead waiter
  -- ahead is passed over by the full attempt), a waiter still registered
  -- (not handed its permits) only moves its deadline. A waiter for more
  -- than one permit also checks that the capacity (never below 1) still
  -- allows its request: its "retry" message may have been lost.
  local first = tonumber(redis.call('zrange', holds, 0, 0, 'withscores')[2])
  local oldest = tonumber(redis.call('zrange', waiters, 0, 0, 'withscores')[2])
  local blocked = first and first > now and oldest and oldest > now
  local want = tonumber(ARGV[2]) or 0
  if blocked and want > 1 then
    blocked = want <= sem_capacity(KEYS[3], redis.call('hget', counts, 'c'), ARGV[4])
  end
  if blocked and touch(waiters, member, ttl, now) then
    keep_registry(queue, waiters, ttl)
    return {0, 0, first - now}
  end
end

local c = redis.call('hmget', counts, '*', 'q', owner, 'c', 's')
local capacity, stored = sem_capacity(KEYS[3], c[4], ARGV[4])
local used, flagged, first, mine, compact
if c[5] and c[5] ~= owner and capacity == 1 then
  -- Another owner's compact single hold of the one permit (see sem)
  -- keeps this caller out whatever it asks: it stays compact, and ends
  -- with the counts.
  used, flagged, first, compact = 1, c[2], now + redis.call('pttl', counts), true
else
  used, flagged, first, mine = sem_used(holds, counts, now, owner, c)
end
if mine then
  -- Handed to this waiter by a release, or taken by an earlier run of
  -- this call whose reply was lost (every acquire has an owner of its
  -- own): the hold gets the full lease, and nothing else changes.
  unregister(queue, waiters, member)
  redis.call('zadd', holds, now + lease, owner)
  sem_keep(holds, lease)
  sem_keep(counts, lease)
  return {1, math.max(0, capacity - used), mine}
end
if ARGV[2] == '*' then
  local n = capacity - used
  if n <= 0 then
    return {0, 0, -1}
  end
  sem_grant(holds, counts, owner, n, now, lease, used)
  return {1, 0, n}
end
local n = tonumber(ARGV[2])

-- full gives a hold handed to this waiter the full lease.
local function full()
  unregister(queue, waiters, member)
  redis.call('zadd', holds, now + lease, owner)
  sem_keep(holds, lease)
  sem_keep(counts, lease)
  return {1, math.max(0, capacity - used), n}
end

if n > capacity and ARGV[10] ~= '1' then
  if waiting then
    unregister(queue, waiters, member)
  end
  return {-1, capacity}
end
local ahead = false
if waiting or (flagged and capacity - used >= n) then
  -- Waiters may be ahead that the free permits satisfy: they go first.
  local got, grants, empty
  got, ahead, used, grants, empty = sem_hand_on(holds, counts, queue, waiters, now, used, capacity, handoff, ARGV[7], ARGV[8], owner)
  sem_settle(holds, counts, grants, used, stored, false, not first, handoff)
  if empty then
    flagged = false
  elseif not flagged then
    -- Waiters are left, and the flag went with the counts (the last
    -- hold's lease ran out, or an operator deleted them): flag them
    -- again, or the release of the permits taken now would hand nothing
    -- on (as rw_acquire).
    sem_flag(counts, ttl, stored, compact)
    flagged = true
  end
  if got then
    return full()
  end
end
if not ahead and n <= capacity and capacity - used >= n then
  if waiting then
    unregister(queue, waiters, member)
  end
  sem_grant(holds, counts, owner, n, now, lease, used)
  return {1, capacity - used - n, n}
end
if ttl ~= '0' then
  register(queue, waiters, member, ttl, now)
  if not flagged then
    sem_flag(counts, ttl, stored, compact)
  end
end
if not first then
  return {0, math.max(0, capacity - used), -1}
end
return {0, math.max(0, capacity - used), first - now}
