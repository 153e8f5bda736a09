-- redlock_release: compare-and-delete a RedLock's value on one node; when
-- waiters are registered there, wake the longest-waiting live one (a
-- RedLock cannot be handed over atomically across nodes: the woken waiter
-- tries the quorum). A waiter that gives up leaves through it too.
-- KEYS[1] lock: the lock key (value: the attempt's value)
-- KEYS[2] queue: the waiter registry's wait queue
-- KEYS[3] waiters: the waiter registry's deadlines
-- ARGV[1] value: the attempt's value, or the waiter's member when leaving
-- ARGV[2] lease_ms: the lease in milliseconds (unused)
-- ARGV[3] prefix: the wake-up channel prefix (a client's channel is
--   prefix:<clientID>)
-- ARGV[4] publish: the publish command (publish or spublish)
-- ARGV[5] mode: '0' a release; '2' the undoing of a failed attempt,
--   which wakes nobody (its owner tries again itself); '1' when ARGV[1] is
--   a waiter that gives up: it leaves the registry, and when it was no
--   longer registered (a release woke it) and the node is free, its
--   wake-up goes to the next waiter
-- reply: int
--   -1 when the value is not there (always when leaving), 0 when
--   released. Only a release on a node with a registered waiter
--   publishes: "<waiter>" on the waiter's client's channel.
-- #include registry
local lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3]

-- wake tells the longest-waiting live waiter, if any, that the node is free.
local function wake()
  if redis.call('exists', queue) == 0 then
    return
  end
  local next = pop(queue, waiters, now_ms())
  if next then
    notify(ARGV[4], ARGV[3], next, next)
  end
end

if ARGV[5] == '1' then
  local registered = redis.call('zscore', waiters, ARGV[1])
  unregister(queue, waiters, ARGV[1])
  if not registered and redis.call('exists', lock) == 0 then
    wake()
  end
  return -1
end
if redis.call('get', lock) ~= ARGV[1] then
  return -1
end
redis.call('del', lock)
if ARGV[5] == '0' then
  wake()
end
return 0
