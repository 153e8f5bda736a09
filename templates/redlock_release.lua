-- redlock_release: compare-and-delete a RedLock's value on one node; when
-- waiters are registered there, wake the live one whose wait began first
-- (the same on every node) and reserve the node for it (a RedLock cannot be handed over atomically
-- across nodes: the woken waiter tries the quorum, and the reservation
-- keeps the node from a newcomer, the releaser's next Lock included,
-- meanwhile). A waiter that gives up leaves through it too.
-- KEYS[1] lock: the lock key (value: the attempt's value)
-- KEYS[2] queue: the waiter registry's wait queue
-- KEYS[3] waiters: the waiter registry's deadlines
-- ARGV[1] value: the attempt's value, or the waiter's member when leaving
-- ARGV[2] reserve_ms: how long the node stays reserved for the waiter
--   woken (the lock key holds "r <waiter>" until it tries)
-- ARGV[3] prefix: the wake-up channel prefix (a client's channel is
--   prefix:<clientID>)
-- ARGV[4] publish: the publish command (publish or spublish)
-- ARGV[5] mode: '0' a release; '2' the undoing of a failed attempt,
--   which wakes nobody (its owner tries again itself); '1' when ARGV[1] is
--   a waiter that gives up: it leaves the registry, and when it was no
--   longer registered (a release woke it) and the node is free or
--   reserved for it, its wake-up and reservation go to the next waiter
-- reply: int
--   -1 when the value is not there (always when leaving), 0 when
--   released. Only a release on a node with a registered waiter
--   publishes: "<waiter>" on the waiter's client's channel.
-- #include registry
local lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3]

-- window is how many members at the head of the queue pop_first
-- compares: members that registered at about the same time can be
-- queued in different orders on different nodes, and within the window
-- every node picks the same one.
local window = 32

-- pop_first takes the live member with the smallest ticket among the
-- first window members of the queue out of the registry and returns it,
-- or nil. A member is "<ticket>@<owner>", the ticket (its wait's first
-- attempt, 16 digits) the same on every node: every node then wakes the
-- same waiter, and none splits the quorum between two. Members compare
-- as strings: the fixed-width ticket decides.
local function pop_first(now)
  purge(queue, waiters, now)
  while true do
    local best = nil
    for _, m in ipairs(redis.call('lrange', queue, 0, window - 1)) do
      if not best or m < best then
        best = m
      end
    end
    if not best then
      return nil
    end
    redis.call('lrem', queue, 1, best)
    if redis.call('zrem', waiters, best) == 1 then
      return best
    end
  end
end

-- wake reserves the free node for the live waiter of the smallest ticket
-- (pop_first), if any, and tells it on its client's channel; with none
-- it deletes the lock key. A waiter whose client no longer listens on
-- this node (the wake-up reached no subscriber: its process died, its
-- connection was cut) is passed over, as a lock's hand-off passes it
-- (notify; with a count that does not cover every subscriber, "publish!",
-- every waiter is taken as listening).
local function wake()
  if redis.call('exists', queue) == 1 then
    local now = now_ms()
    while true do
      local next = pop_first(now)
      if not next then
        break
      end
      if notify(ARGV[4], ARGV[3], next, next) then
        redis.call('set', lock, 'r ' .. next, 'PX', ARGV[2])
        return
      end
    end
  end
  redis.call('del', lock)
end

if ARGV[5] == '1' then
  local registered = redis.call('zscore', waiters, ARGV[1])
  unregister(queue, waiters, ARGV[1])
  local v = redis.call('get', lock)
  if not registered and (not v or v == 'r ' .. ARGV[1]) then
    wake()
  end
  return -1
end
if redis.call('get', lock) ~= ARGV[1] then
  return -1
end
if ARGV[5] == '0' then
  wake()
else
  redis.call('del', lock)
end
return 0
