-- rw_release: give up one hold of one side of a read-write lock; when that
-- lets waiters proceed, hand the lock to them.
-- KEYS[1] lock: the lock hash ("writer" -> the write holder's owner id,
--   "writes" -> its hold count, "r:<owner>" -> a reader's hold count, "q"
--   -> 1 while waiters may be registered, "s" -> a compact single hold's
--   member: see rw_first)
-- KEYS[2] holds: the holds' deadlines (a zset: "w" for the write hold,
--   "r:<owner>" per reader -> server ms when that hold's lease runs out),
--   so a dead reader's share runs out alone
-- KEYS[3] queue: the waiter registry's wait queue (members "<owner> r|w")
-- KEYS[4] waiters: the waiter registry's deadlines
-- ARGV[1] owner: the owner id
-- ARGV[2] lease_ms: the lease in milliseconds
-- ARGV[3] prefix: the wake-up channel prefix (a client's channel is
--   prefix:<clientID>)
-- ARGV[4] publish: the publish command (publish or spublish)
-- ARGV[5] handoff_ms: the hand-off lease in milliseconds
-- ARGV[6] leaving: '1' when the owner gives up waiting (it leaves the
--   registry, and hands on a hold it was handed but did not use)
-- ARGV[7] side: r or w
-- ARGV[8]? op: the release's operation id, recorded with the holds left
--   (see rw_acquire): a call that finds it recorded ran already and
--   answers the holds left
-- reply: int
--   -1 when the owner does not hold that side, the holds left when still
--   held (the hold's lease is restarted), or 0 when released. Only a lock
--   whose "q" flag says that waiters are registered reads the registry
--   and publishes: the live waiters at the head that can now proceed (a
--   writer alone, or the readers before the first waiting writer) are
--   handed the lock (see rw_hand_on).
local lock, deadlines = KEYS[1], KEYS[2]
local owner, side = ARGV[1], ARGV[7]
local reader = 'r:' .. owner
local field, hold = reader, reader
if side == 'w' then
  field, hold = 'writes', 'w'
end
local opsfield, op = 'o' .. side .. ':' .. owner, ARGV[8]
local state = redis.call('hmget', lock, 'writer', 'q', field, reader, opsfield, 's')
-- The uncontended fast path runs before the registry's functions are
-- defined: the owner's compact single hold (see rw_first) with nobody
-- registered is the lock hash alone.
local single = state[6] == hold and (side ~= 'w' or state[1] == owner)
if single and not state[2] then
  redis.call('del', lock)
  if ARGV[6] ~= '1' then
    return 0
  end
end
-- #include registry
-- #include rw
local queue, waiters = KEYS[3], KEYS[4]
local lease = tonumber(ARGV[2])

if ARGV[6] == '1' then
  unregister(queue, waiters, owner .. ' ' .. side)
end
if single and not state[2] then
  return 0
end
if state[6] == 'w' and state[1] ~= owner then
  -- Another owner's compact write hold: this owner holds neither side,
  -- and nothing can be handed on (a second run of a release that handed
  -- the lock on finds it so, and leaves it as it is).
  return -1
end
local now = now_ms()
if single then
  -- The owner's compact hold with waiters registered (a compact write
  -- hold, see rw_first): the only hold, so the lock is free once it goes;
  -- the live waiters at the head get it, a writer as a compact hold.
  local _, _, handed, _, _, compacted = rw_hand_on(lock, deadlines, queue, waiters, now, tonumber(ARGV[5]), ARGV[3], ARGV[4], nil, nil, false, hold, false)
  if compacted then
    redis.call('pexpire', lock, ARGV[5])
  elseif handed then
    redis.call('pexpire', lock, ARGV[5])
    redis.call('pexpire', deadlines, ARGV[5])
  else
    redis.call('del', lock)
  end
  return 0
end
local first, evicted = rw_first(lock, deadlines, now)
if evicted then
  -- Holds ran out: their fields are gone.
  state = redis.call('hmget', lock, 'writer', 'q', field, reader, opsfield)
end
local writer, flagged = state[1], state[2]
local held = state[3]
if side == 'w' and writer ~= owner then
  held = nil
end

local holds, gone = -1, false
if held and op and ops_has(state[5] or '', op) then
  return tonumber(held) -- this call ran already: its reply was lost
end
if held then
  holds = tonumber(held) - 1
  if holds > 0 then
    if op then
      redis.call('hset', lock, field, holds, opsfield, ops_push(state[5] or '', op))
    else
      redis.call('hset', lock, field, holds)
    end
    redis.call('zadd', deadlines, now + lease, hold)
  elseif side == 'w' then
    -- Dropped below unless a writer is handed the lock: its hold then
    -- replaces this one.
    writer, gone = nil, true
    if state[5] then -- (a re-entry recorded operation ids)
      redis.call('hdel', lock, opsfield)
    end
  else
    redis.call('hdel', lock, field, opsfield)
    redis.call('zrem', deadlines, hold)
  end
end
local handed = false
if flagged and holds <= 0 then
  -- Is anything else held? A writer's release leaves its own read hold
  -- at most; a reader's, the other readers or the writer.
  local others = state[4] ~= false
  if side == 'r' or not gone then
    others = writer ~= false or redis.call('zcard', deadlines) > 0
  end
  local _, wrote, compacted
  -- A reader's release that leaves holds behind can hand nothing on:
  -- while readers hold, the head of the queue is a writer (a reader comes
  -- to queue only behind one), and a dead writer there is passed over by
  -- the last hold's release or a waiter's attempt.
  if side == 'w' or not others then
    -- With nothing else held, a writer handed the lock gets a compact
    -- hold in place of this one (the holds key's only entry, 'w', or
    -- nothing when a reader's went above).
    local released
    if not others then
      released = ''
      if gone then
        released = 'w'
      end
    end
    _, wrote, handed, _, _, compacted = rw_hand_on(lock, deadlines, queue, waiters, now, tonumber(ARGV[5]), ARGV[3], ARGV[4], nil, writer or nil, others, released, gone)
  end
  if wrote then
    gone = false
  end
  if compacted then
    redis.call('pexpire', lock, ARGV[5])
    return holds
  end
  if handed and not others then
    -- The hand-off's holds are the only ones: the keys live as long.
    if gone then
      redis.call('hdel', lock, 'writer', 'writes')
      redis.call('zrem', deadlines, 'w')
    end
    redis.call('pexpire', lock, ARGV[5])
    redis.call('pexpire', deadlines, ARGV[5])
    return holds
  end
end
if gone then
  redis.call('hdel', lock, 'writer', 'writes')
  redis.call('zrem', deadlines, 'w')
end
if held or handed then
  rw_keep(lock, deadlines, now)
end
return holds
