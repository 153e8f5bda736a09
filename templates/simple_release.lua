-- simple_release: compare-and-delete a non-reentrant lock; when waiters
-- are registered, hand it to the longest-waiting live one instead.
-- KEYS[1] lock: the lock key (value: owner id[ w])
-- KEYS[2]? queue: the waiter registry's wait queue (a hold the fast path
--   took is released with the lock's key alone, KEYS[1], and ARGV[1]:
--   then the reply is -3 when the release would hand the lock on)
-- KEYS[3]? waiters: the waiter registry's deadlines
-- ARGV[1] owner: the owner id
-- ARGV[2]? lease_ms: the lease in milliseconds (unused: a simple lock has
--   one hold; the fast path's call leaves it out)
-- ARGV[3]? prefix: the wake-up channel prefix
-- ARGV[4]? publish: the publish command (publish or spublish)
-- ARGV[5]? handoff_ms: the hand-off lease in milliseconds; 'l<ms>' for a lock the
--   watchdog does not renew: its lease, told to the waiter (see hand_on)
-- ARGV[6]? leaving: '1' when the owner gives up waiting; '0' or absent
--   otherwise
-- reply: int
--   -1 when the owner does not hold the lock, 0 when released. A release
--   of a value without " w" only deletes the key; otherwise the first live
--   waiter gets the lock ("<waiter>[ w]", with the hand-off lease) and a
--   message "<waiter>" on its client's channel (a multi-lock waiter,
--   "<owner> <detail>", is woken to try again and the key deleted). -3,
--   nothing changed, when that hand-off is due and the call left the
--   registry's keys out: call again with them.
local lock, owner, leaving = KEYS[1], ARGV[1], ARGV[6] == '1'
-- The uncontended fast path runs before the registry's functions are
-- defined: a leaving owner unregisters first.
local value = not leaving and redis.call('get', lock)
if value == owner then
  redis.call('del', lock)
  return 0
end
-- #include registry
local queue, waiters = KEYS[2], KEYS[3]

if leaving then
  unregister(queue, waiters, owner)
  value = redis.call('get', lock)
end
if value == owner then -- a leaving owner handed the lock, no waiter left
  redis.call('del', lock)
  return 0
end
if value ~= owner .. ' w' then
  return -1
end
if not queue then
  return -3
end
hand_on(lock, queue, waiters, nil, false, ARGV[5], ARGV[3], ARGV[4])
return 0
