-- rw_acquire: take or re-enter one side of a read-write lock; a caller
-- that cannot take it registers as a waiter in the same call. Readers
-- share; the writer excludes everyone but itself, and may take the read
-- side too (to downgrade: then release the write side). While waiters are
-- registered, a newcomer does not pass them: it takes the lock only when
-- nobody is left waiting after the live waiters at the head that can
-- proceed were handed it.
-- KEYS[1] lock: the lock hash ("writer" -> the write holder's owner id,
--   "writes" -> its hold count, "r:<owner>" -> a reader's hold count, "q"
--   -> 1 while waiters may be registered)
-- KEYS[2] holds: the holds' deadlines (a zset: "w" for the write hold,
--   "r:<owner>" per reader -> server ms when that hold's lease runs out),
--   so a dead reader's share runs out alone
-- KEYS[3] queue: the waiter registry's wait queue (members "<owner> r|w")
-- KEYS[4] waiters: the waiter registry's deadlines
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] owner: the owner id
-- ARGV[3] registry_ttl_ms: how long a registration lasts (0: do not
--   register)
-- ARGV[4] registered: '1' when the owner is registered already (a woken
--   waiter), '2' when it is registered and only refreshes its entry while
--   a live hold blocks it (a writer: any hold; a reader: the write hold,
--   or any hold while a live writer waits at the head of the queue), '3'
--   for a first attempt that skips the uncontended check (its client
--   found the lock contended lately), else '0'
-- ARGV[5] prefix: the wake-up channel prefix
-- ARGV[6] publish: the publish command (publish or spublish)
-- ARGV[7] handoff_ms: the hand-off lease in milliseconds
-- ARGV[8] side: r or w
-- ARGV[9]? op: a re-entry's operation id (see opsfield); absent for a new
--   owner, whose call finding its own hold ran already
-- reply: int | {int, int}
--   1 when the fast path took the free lock (a new owner's first
--   attempt, neither key there: the compact single hold, see rw_first;
--   an integer costs Redis and the client less than a table); {1, holds}
--   when taken, re-entered, or found handed to this waiter by a
--   release (its hold then gets the full lease); {0, ms} when the caller
--   must wait, ms being when the first hold in its way runs out (after a
--   refresh that only moved the entry's deadline, too); {-2, 0}
--   when a reader asks for the write side (an upgrade, refused: two
--   upgrading readers would wait for each other forever).
local lock, deadlines = KEYS[1], KEYS[2]
-- The uncontended fast path runs before the registry's functions are
-- defined: a new owner's first attempt on a free lock (neither key there,
-- so nobody registered since it was last held) takes it as the compact
-- single hold (see rw_first), without TIME or the holds key. A second
-- run of this call finds its hold below.
if ARGV[4] == '0' and not ARGV[9] and redis.call('exists', lock, deadlines) == 0 then
  if ARGV[8] == 'w' then
    redis.call('hset', lock, 'writer', ARGV[2], 'writes', '1', 's', 'w')
    redis.call('pexpire', lock, ARGV[1])
    return 1
  elseif ARGV[8] == 'r' then
    local reader = 'r:' .. ARGV[2]
    redis.call('hset', lock, reader, '1', 's', reader)
    redis.call('pexpire', lock, ARGV[1])
    return 1
  end
end
-- #include registry
-- #include rw
local queue, waiters = KEYS[3], KEYS[4]
local lease, owner, ttl, waiting = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1' or ARGV[4] == '2'
local side = ARGV[8]
if side ~= 'r' and side ~= 'w' then
  return redis.error_reply('lockgen: the side of a read-write lock is r or w, not ' .. tostring(side))
end
local member = owner .. ' ' .. side
local now = now_ms()

if ARGV[4] == '2' then
  -- A refresh: while a live hold blocks the waiter and it is registered
  -- (not handed the lock), only its deadline moves. A reader is blocked
  -- by the write hold, or, while readers hold, by a live writer waiting
  -- at the head of the queue (until the earliest hold runs out); with a
  -- dead writer there, it makes the full attempt, which passes over it.
  local ends
  if side == 'w' then
    ends = redis.call('zrange', deadlines, 0, 0, 'withscores')[2]
  else
    ends = redis.call('zscore', deadlines, 'w')
    if not ends then
      local head = redis.call('lindex', queue, 0)
      if head and string.sub(head, -2) == ' w' and (tonumber(redis.call('zscore', waiters, head)) or 0) > now then
        ends = redis.call('zrange', deadlines, 0, 0, 'withscores')[2]
      end
    end
  end
  ends = tonumber(ends)
  if ends and ends > now and touch(waiters, member, ttl, now) then
    keep_registry(queue, waiters, ttl)
    return {0, ends - now}
  end
end

local reader = 'r:' .. owner
local field, hold = reader, reader
if side == 'w' then
  field, hold = 'writes', 'w'
end
-- A re-entry's operation id is recorded in the field "o<side>:<owner>",
-- the last four (see ops_push in registry).
local opsfield, op = 'o' .. side .. ':' .. owner, ARGV[9]
local state = redis.call('hmget', lock, 'writer', 'q', reader, opsfield, 's')
local first
if state[5] == 'w' and state[1] ~= owner then
  -- Another owner's compact write hold (see rw_first) keeps this caller
  -- out whatever its side: it stays compact, and ends with the lock.
  first = now + redis.call('pttl', lock)
else
  local evicted
  first, evicted = rw_first(lock, deadlines, now)
  if evicted then
    -- Holds ran out: their fields are gone.
    state = redis.call('hmget', lock, 'writer', 'q', reader, opsfield)
  end
end

-- take records a hold; both keys live as long as the last hold.
local function take(ops)
  local holds = redis.call('hincrby', lock, field, 1)
  if op then
    redis.call('hset', lock, opsfield, ops_push(ops or '', op))
  end
  redis.call('zadd', deadlines, now + lease, hold)
  if first then
    rw_keep(lock, deadlines, now)
  else
    redis.call('pexpire', lock, lease)
    redis.call('pexpire', deadlines, lease)
  end
  return holds
end

-- full gives a hold handed to this waiter the full lease.
local function full()
  unregister(queue, waiters, member)
  redis.call('zadd', deadlines, now + lease, hold)
  rw_keep(lock, deadlines, now)
  return {1, tonumber(redis.call('hget', lock, field))}
end

local writer, flagged, reading = state[1], state[2], state[3]
if (side == 'w' and writer == owner) or (side == 'r' and reading) then
  if waiting or not op or ops_has(state[4] or '', op) then
    -- Handed by a release, or this call ran already (its reply was
    -- lost; a new owner's call has no op).
    return full()
  end
  return {1, take(state[4])}
end
if side == 'r' and writer == owner then
  return {1, take(state[4])}
end
if side == 'w' and reading then
  return {-2, 0}
end

-- Whether the holds alone keep this caller out.
local blocked = writer ~= false
if side == 'w' then
  blocked = first ~= nil
end
local ahead = false
if waiting or (flagged and not blocked) then
  -- Waiters may be ahead that can proceed: they go first.
  local got, wrote, handed, empty
  got, wrote, handed, ahead, empty = rw_hand_on(lock, deadlines, queue, waiters, now, tonumber(ARGV[7]), ARGV[5], ARGV[6], owner, writer or nil, first ~= nil)
  if empty then
    flagged = false
  elseif not flagged then
    -- Waiters are left, and the flag went with the lock hash (a forced
    -- unlock, or the last hold's lease ran out): flag them again, or the
    -- release of the hold taken now would hand nothing on.
    redis.call('hset', lock, 'q', 1)
    flagged = true
  end
  if got then
    return full()
  end
  if handed then
    rw_keep(lock, deadlines, now)
    first = now + tonumber(ARGV[7])
    writer = writer or wrote
    blocked = side == 'w' or writer ~= nil
  end
end

if not ahead and not blocked then
  if waiting then
    unregister(queue, waiters, member)
  end
  if side == 'w' then
    redis.call('hset', lock, 'writer', owner)
  end
  return {1, take()}
end

if ttl ~= '0' then
  register(queue, waiters, member, ttl, now)
  if not flagged then
    redis.call('hset', lock, 'q', 1)
  end
end
if not first then
  return {0, 1000}
end
return {0, first - now}
