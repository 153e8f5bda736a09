-- fair_acquire: take or re-enter a fair lock, first come first served; a
-- caller that cannot take it registers as a waiter in the same call.
-- KEYS[1] lock: the lock hash (field: owner, value: hold count; "s" ->
--   the owner of a hold the fast path took, while nobody registered
--   since: its release then only deletes the key)
-- KEYS[2] queue: the waiter registry's wait queue, in arrival order
-- KEYS[3] waiters: the waiter registry's deadlines, in server milliseconds
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] owner: the owner id
-- ARGV[3] registry_ttl_ms: how long a registration lasts (0: only try)
-- ARGV[4] registered: '1' when the owner is registered already (a woken
--   waiter), '2' when it only refreshes its entry unless the lock is free
--   or was handed to it (see refresh in registry), '3' for a first
--   attempt that skips the uncontended check (its client found the lock
--   contended lately), else '0'
-- ARGV[5] prefix: the wake-up channel prefix
-- ARGV[6] publish: the publish command (publish or spublish)
-- ARGV[7] handoff_ms: the hand-off lease in milliseconds
-- ARGV[8]? op: a re-entry's operation id, recorded after the owner's hold
--   count ("<holds> <op>[,<op>...]", the last four): a call that finds it
--   recorded ran already; absent for a new owner, whose call finding its
--   own hold ran already
-- reply: int | {int, int}
--   1 when the fast path took the free lock (a new owner's first
--   attempt, nobody registered: neither the lock nor the queue exists;
--   an integer costs Redis and the client less than a table); {1, holds}
--   when taken, re-entered, or found handed to this waiter by a
--   release (its lease is then extended to the full lease); {0, pttl}
--   otherwise. A free lock with a live waiter first is handed to that
--   waiter (its hand-off ran out, or was lost), never taken past it.
local lock, queue = KEYS[1], KEYS[2]
-- The uncontended fast path runs before the registry's functions are
-- defined: a new owner's first attempt on a free lock nobody waits for
-- takes it, marked "s" so that its release needs no registry read. A
-- second run of this call finds its hold below.
if ARGV[4] == '0' and not ARGV[8] and redis.call('exists', lock, queue) == 0 then
  redis.call('hset', lock, ARGV[2], '1', 's', ARGV[2])
  redis.call('pexpire', lock, ARGV[1])
  return 1
end
-- #include registry
local waiters = KEYS[3]
local lease, owner = ARGV[1], ARGV[2]
local ttl, waiting = ARGV[3], ARGV[4] == '1' or ARGV[4] == '2'

if ARGV[4] == '2' then
  local pttl = refresh(lock, queue, waiters, owner, ttl)
  if pttl then
    return {0, pttl}
  end
end

local state = redis.call('hmget', lock, owner, 's')
local held = state[1]
if held then
  local holds, ops = string.match(held, '^(%d+) ?(.*)$')
  holds = tonumber(holds)
  local op = ARGV[8]
  redis.call('pexpire', lock, lease)
  if waiting or not op or ops_has(ops, op) then
    -- Handed to this waiter, or this call ran already (its reply was
    -- lost): a new owner's call has no op.
    return {1, holds}
  end
  holds = holds + 1
  redis.call('hset', lock, owner, holds .. ' ' .. ops_push(ops, op))
  return {1, holds}
end
local now
local pttl = redis.call('pttl', lock)
if pttl == -2 then
  local head
  if redis.call('exists', queue) == 1 then
    now = now_ms()
    purge(queue, waiters, now)
    head = redis.call('lindex', queue, 0)
  end
  -- A head whose client no longer listens is passed over (notify).
  while head and head ~= owner do
    unregister(queue, waiters, head)
    if notify(ARGV[6], ARGV[5], head, handed_at(head, now)) then
      break
    end
    head = redis.call('lindex', queue, 0)
  end
  if not head or head == owner then
    if head then
      unregister(queue, waiters, owner)
    end
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {1, 1}
  end
  redis.call('hset', lock, head, 1)
  redis.call('pexpire', lock, ARGV[7])
  pttl = tonumber(ARGV[7])
end
if ttl ~= '0' then
  register(queue, waiters, owner, ttl, now or now_ms())
  if state[2] then
    redis.call('hdel', lock, 's') -- its release must read the registry
  end
end
return {0, pttl}
