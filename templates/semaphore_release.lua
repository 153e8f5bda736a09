-- semaphore_release: give back the permits of one hold; when waiters are
-- registered, hand the freed permits on to them.
-- KEYS[1] holds: the holds (a zset: owner -> expiry in server ms)
-- KEYS[2] counts: the counts (a hash: owner -> its permits, '*' -> permits
--   held in all, 'q' -> 1 while waiters may be registered, 'c' -> the
--   capacity key's value cached, 0 for none; 's' -> the owner of a
--   compact single hold, see semaphore_acquire)
-- KEYS[3]? capacity: the capacity, when an operator set one (a release
--   of one hold is first sent with KEYS[1..2] and ARGV[1] alone: then the
--   reply is -3, nothing changed, when waiters may be registered, and the
--   caller sends it again whole)
-- KEYS[4]? queue: the waiter registry's wait queue (members "<owner> <n>")
-- KEYS[5]? waiters: the waiter registry's deadlines
-- ARGV[1] owner: the owner id
-- ARGV[2]? prefix: the wake-up channel prefix (a client's channel is
--   prefix:<clientID>)
-- ARGV[3]? publish: the publish command (publish or spublish)
-- ARGV[4]? spec_capacity: the spec's capacity
-- ARGV[5]? handoff_ms: the hand-off lease in milliseconds
-- ARGV[6]? leaving: when the owner gives up waiting, the permits it waited
--   for (it leaves the registry, and gives back permits it was handed but
--   did not use), else '0'
-- reply: int
--   The permits given back, or -1 when the owner holds none (released
--   already, or evicted after its lease ran out). Only a semaphore whose
--   'q' flag says that waiters are registered reads the registry and
--   publishes: the waiters the free permits satisfy, in arrival order, get
--   them (see sem_hand_on).
local holds, counts, owner = KEYS[1], KEYS[2], ARGV[1]
local c = redis.call('hmget', counts, owner, '*', 'q', 'c', 's')
-- The uncontended fast path runs before the registry's functions are
-- defined: the owner's compact single hold (nobody registered since it
-- was taken) is the counts alone.
local leaving = ARGV[6] or '0'
if c[5] == owner and not c[3] then
  redis.call('del', counts)
  if leaving == '0' then
    return 1
  end
end
if not KEYS[3] and c[3] then
  return -3 -- waiters may be due the permits: call again with every key
end
-- #include registry
-- #include sem
local queue, waiters = KEYS[4], KEYS[5]
local handoff = ARGV[5]

if leaving ~= '0' then
  unregister(queue, waiters, owner .. ' ' .. leaving)
end
if c[5] == owner and not c[3] then
  return 1
end
local n, used = -1, tonumber(c[2]) or 0
if c[5] == owner then
  -- The owner's compact single hold with waiters registered (see sem).
  n, used = 1, 0
  redis.call('hdel', counts, owner, 's')
elseif (leaving == '0' or c[1]) and redis.call('zrem', holds, owner) == 1 then
  -- (A waiter that leaves holding nothing has no count: no ZREM.)
  n = tonumber(c[1]) or 0
  used = used - n
  redis.call('hdel', counts, owner)
  if not c[3] then
    if redis.call('zcard', holds) == 0 then
      redis.call('del', counts)
    else
      redis.call('hincrby', counts, '*', -n)
    end
    return n
  end
end
if not c[3] then
  return n
end
-- Holds that ran out still count here: the waiters' next attempt or
-- refresh (due by the earliest hold's deadline) evicts them.
local capacity, stored = sem_capacity(KEYS[3], c[4], ARGV[4])
if n < 0 and used >= capacity then
  -- A waiter left holding nothing, and nothing is free: nobody behind it
  -- can proceed (sem_hand_on would stop at once), and the dead are left
  -- for the next hand-off's purge. A leave is then HMGET, ZREM, LREM.
  return n
end
local now = now_ms()
-- On a semaphore of one permit whose only hold this was, the waiter it
-- is handed to gets it as the compact single hold (see sem).
local one = capacity == 1 and used == 0
local _, _, held, grants, empty = sem_hand_on(holds, counts, queue, waiters, now, used, capacity, handoff, ARGV[2], ARGV[3], nil, one)
if one and #grants > 0 then
  redis.call('hset', counts, 's', grants[1], grants[1], grants[2], '*', held, 'c', stored)
  redis.call('pexpire', counts, handoff)
  return n
end
if empty and held == 0 then
  -- Nothing held and nobody waiting: the counts go, as with nobody
  -- registered (the flag stayed set after the last hand-off).
  redis.call('del', counts)
  return n
end
sem_settle(holds, counts, grants, held, stored, n >= 0, used == 0, handoff)
return n
