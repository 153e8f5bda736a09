-- rw_release: give up one hold of one side of a read-write lock; when that
-- lets waiters proceed, hand the lock to them.
-- KEYS[1] lock: the lock hash ("writer" -> the write holder's owner id,
--   "writes" -> its hold count, "r:<owner>" -> a reader's hold count, "q"
--   -> 1 while waiters may be registered)
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
-- reply: int
--   -1 when the owner does not hold that side, the holds left when still
--   held (the hold's lease is restarted), or 0 when released. Only a lock
--   whose "q" flag says that waiters are registered reads the registry
--   and publishes: the live waiters at the head that can now proceed (a
--   writer alone, or the readers before the first waiting writer) are
--   handed the lock (see rw_hand_on).
-- #include registry
-- #include rw
local lock, deadlines, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, lease, side = ARGV[1], tonumber(ARGV[2]), ARGV[7]
local now = now_ms()
rw_expire(lock, deadlines, now)

if ARGV[6] == '1' then
  unregister(queue, waiters, owner .. ' ' .. side)
end
local field, hold = 'r:' .. owner, 'r:' .. owner
if side == 'w' then
  field, hold = 'writes', 'w'
end
local state = redis.call('hmget', lock, 'writer', 'q', field)
local held = state[3]
if side == 'w' and state[1] ~= owner then
  held = nil
end

local holds, writer = -1, state[1]
if held then
  holds = redis.call('hincrby', lock, field, -1)
  if holds > 0 then
    redis.call('zadd', deadlines, now + lease, hold)
  else
    if side == 'w' then
      redis.call('hdel', lock, 'writer', 'writes')
      writer = nil
    else
      redis.call('hdel', lock, field)
    end
    redis.call('zrem', deadlines, hold)
  end
end
local handed = false
if state[2] and holds <= 0 then
  local _
  _, handed = rw_hand_on(lock, deadlines, queue, waiters, now, tonumber(ARGV[5]), ARGV[3], ARGV[4], nil, writer)
end
if held or handed then
  rw_keep(lock, deadlines, now)
end
return holds
