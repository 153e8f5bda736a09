-- redlock_acquire: take a RedLock on one node (SET NX PX, with a value
-- new to each attempt); a waiter that cannot take it registers in the
-- node's waiter registry in the same call. A node that a release reserved
-- for the waiter it woke (value "r <waiter>") is that waiter's to take.
-- KEYS[1] lock: the lock key (value: the attempt's value)
-- KEYS[2] queue: the waiter registry's wait queue
-- KEYS[3] waiters: the waiter registry's deadlines
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] value: the attempt's value
-- ARGV[3] waiter: the waiter's member in this node's registry
--   ("<ticket>@<clientID>:<n>": the wait's first attempt in Unix
--   microseconds, 16 digits, the same on every node, and an owner of the
--   node's client; the same over the attempts of one wait; '' when it
--   does not register)
-- ARGV[4] registry_ttl_ms: how long a registration lasts (0: do not
--   register)
-- ARGV[5] registered: '0' for a first attempt, '1' for a waiter's attempt
--   (granted, it leaves the registry), '2' for a waiter's refresh: while
--   another value holds the node and the waiter is still registered, it
--   only extends its entry (refresh in registry), otherwise it attempts
-- reply: {int, int}
--   {1, 1} when granted (also to a second run of the same attempt, which
--   finds its value there: one GET, on the refused path only); {0, pttl}
--   when another value holds the lock or it is reserved for another
--   waiter.
-- #include registry
local lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3]
local lease, value, waiter = ARGV[1], ARGV[2], ARGV[3]
local ttl = ARGV[4]

if ARGV[5] == '2' then
  local pttl = refresh(lock, queue, waiters, waiter, ttl)
  if pttl then
    return {0, pttl}
  end
end
local granted = redis.call('set', lock, value, 'NX', 'PX', lease)
if not granted then
  local held = redis.call('get', lock)
  if held == value then
    -- This attempt's own grant: the call ran before and its reply was
    -- lost (the value is new to each attempt, and undone only after
    -- the attempt's last send).
    return {1, 1}
  end
  if waiter ~= '' and held == 'r ' .. waiter then
    granted = redis.call('set', lock, value, 'PX', lease)
  end
end
if granted then
  if ARGV[5] ~= '0' then
    unregister(queue, waiters, waiter)
  end
  return {1, 1}
end
if ttl ~= '0' then
  register(queue, waiters, waiter, ttl, now_ms())
end
return {0, redis.call('pttl', lock)}
