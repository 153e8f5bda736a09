-- reentrant_release: give up one hold of a reentrant (or fenced) lock; the
-- last hold hands the lock to the longest-waiting live waiter, if any.
-- KEYS[1] lock: "<owner> <holds>[ <token>][ w]", a single hold "<owner>"
-- KEYS[2]? queue: the waiter registry's wait queue (a hold the fast path
--   took is released with the lock's key alone, KEYS[1], and ARGV[1], or
--   ARGV[1..2] for a lock the watchdog does not renew: then the reply is -3
--   when the release would hand the lock on)
-- KEYS[3]? waiters: the waiter registry's deadlines
-- KEYS[4]? fence: a fenced lock's fence counter
-- ARGV[1] owner: the owner id
-- ARGV[2]? lease_ms: the lease in milliseconds (absent: a hold left keeps
--   the lock's TTL; for a hold the watchdog renews)
-- ARGV[3]? prefix: the wake-up channel prefix (a client's channel is
--   prefix:<clientID>)
-- ARGV[4]? publish: the publish command (publish or spublish)
-- ARGV[5]? handoff_ms: the lease of a hand-off in milliseconds; 'l<ms>' for a lock the
--   watchdog does not renew: its lease, told to the waiter (see hand_on)
-- ARGV[6]? leaving: '1' when the owner gives up waiting (it leaves the
--   registry, and hands on a lock it was handed but did not use); '0' or
--   absent otherwise
-- ARGV[7]? op: the release's operation id, recorded in the value when
--   holds are left (see has_op in registry): a call that finds it
--   recorded ran already and answers the holds left. Absent in the fast
--   path's call, which releases an owner's first hold (the only one an
--   acquire's fast path takes), whose op is '0'.
-- reply: int
--   -1 when the owner does not hold the lock, the holds left when still
--   held (the lease restarted when lease_ms is given), or 0 when released.
--   A release without " w" only deletes the key. Otherwise the first live
--   waiter gets the lock ("<waiter> 1[ <new token>][ w]", with the
--   hand-off lease) and a message "<waiter>[ <token>]" on its client's
--   channel; a waiter registered as "<owner> <detail>" (a multi-lock) is
--   woken to try again instead, and the key deleted. -3, nothing changed, when that hand-off
--   is due and the call left the registry's keys out: call again with
--   them.
local lock, owner = KEYS[1], ARGV[1]
local value
-- The uncontended fast path runs before the registry's functions are defined.
if ARGV[6] ~= '1' then
  value = redis.call('get', lock)
  -- A reentrant lock's single hold is "<owner>", a fenced lock's
  -- "<owner> 1 <token>" (nobody registered: no " w").
  if value == owner or (value and string.match(value, '^(.-) 1 %d+$') == owner) then
    redis.call('del', lock)
    return 0
  end
end
-- #include registry
local queue, waiters, fence = KEYS[2], KEYS[3], KEYS[4]

if ARGV[6] == '1' then
  unregister(queue, waiters, owner)
  value = redis.call('get', lock)
end
if not value then
  return -1
end
local holder, holds, rest = hold_of(value)
if holder ~= owner then
  return -1
end
local op = ARGV[7] or '0'
if has_op(rest, op) then
  return holds -- this call ran already: its reply was lost
end
holds = holds - 1
if holds > 0 then
  rest = with_op(rest, op)
  if ARGV[2] then
    redis.call('set', lock, owner .. ' ' .. holds .. rest, 'PX', ARGV[2])
  else
    redis.call('set', lock, owner .. ' ' .. holds .. rest, 'KEEPTTL')
  end
  return holds
end
if string.sub(rest, -2) ~= ' w' then
  redis.call('del', lock)
  return 0
end
if not queue then
  return -3
end
hand_on(lock, queue, waiters, fence, true, ARGV[5], ARGV[3], ARGV[4])
return 0
