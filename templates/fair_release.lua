-- fair_release: give up one hold of a fair lock; the last hold hands the
-- lock to the first live waiter, if any.
-- KEYS[1] lock: the lock hash ("s" -> the owner of a hold fair_acquire's
--   fast path took, while nobody registered since)
-- KEYS[2]? queue: the waiter registry's wait queue (a hold the fast
--   path took is released with the lock's key and ARGV[1] alone: then the
--   reply is -3, nothing changed, when the owner holds the lock otherwise)
-- KEYS[3]? waiters: the waiter registry's deadlines
-- ARGV[1] owner: the owner id
-- ARGV[2]? lease_ms: the lease in milliseconds
-- ARGV[3]? prefix: the wake-up channel prefix
-- ARGV[4]? publish: the publish command (publish or spublish)
-- ARGV[5]? handoff_ms: the hand-off lease in milliseconds
-- ARGV[6]? leaving: '1' when the owner gives up waiting (it leaves the
--   registry, and hands on a lock it was handed but did not use)
-- ARGV[7]? op: the release's operation id, recorded with the holds left
--   (see fair_acquire): a call that finds it recorded ran already and
--   answers the holds left
-- reply: int
--   -1 when the owner does not hold the lock, the holds left when still
--   held (the lease is restarted), or 0 when released. The waiter handed
--   the lock gets "<waiter>" on its client's channel.
local lock, owner = KEYS[1], ARGV[1]
-- A waiter that leaves while still registered holds nothing: a release
-- that hands it the lock, or its own attempt that takes it, takes it out
-- of the registry in the same call. Its entry goes, and nothing else is
-- read (a resend finds it gone, and answers -1 below as well).
if ARGV[6] == '1' and KEYS[3] and redis.call('zrem', KEYS[3], owner) == 1 then
  redis.call('lrem', KEYS[2], 1, owner)
  return -1
end
local state = redis.call('hmget', lock, owner, 's')
-- The uncontended fast path runs before the registry's functions are
-- defined: the last hold of an owner whose first the acquire's fast path
-- took, nobody registered since, is released by deleting the key: "1",
-- or "1 <op>,..." after re-entries when the call names no op (the first
-- hold's release; a call with an op may be a resend of a release that
-- left this hold, which the full path answers).
if state[2] == owner and ARGV[6] ~= '1' and (state[1] == '1' or (not ARGV[7] and string.sub(state[1] or '', 1, 2) == '1 ')) then
  redis.call('del', lock)
  return 0
end
if not KEYS[2] then
  if state[1] then
    return -3 -- held otherwise: call again with every key and argument
  end
  return -1
end
-- #include registry
local queue, waiters = KEYS[2], KEYS[3]

if ARGV[6] == '1' then
  unregister(queue, waiters, owner)
end
local held = state[1]
if not held then
  return -1
end
local holds, ops = string.match(held, '^(%d+) ?(.*)$')
holds = tonumber(holds)
local op = ARGV[7] or '0'
if ops_has(ops, op) then
  return holds -- this call ran already: its reply was lost
end
if holds > 1 then
  redis.call('hset', lock, owner, (holds - 1) .. ' ' .. ops_push(ops, op))
  redis.call('pexpire', lock, ARGV[2])
  return holds - 1
end
redis.call('del', lock)
local now = now_ms()
local next = pop(queue, waiters, now)
-- A waiter whose client no longer listens is passed over (notify).
while next and not notify(ARGV[4], ARGV[3], next, handed_at(next, now)) do
  next = pop(queue, waiters, now, true)
end
if next then
  redis.call('hset', lock, next, 1)
  redis.call('pexpire', lock, ARGV[5])
end
return 0
