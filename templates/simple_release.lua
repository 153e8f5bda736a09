-- simple_release: compare-and-delete a non-reentrant lock; when waiters
-- are registered, hand it to the longest-waiting live one instead.
-- KEYS[1] the lock key (value: owner id[ w]); KEYS[2], KEYS[3] the waiter
-- registry (queue, waiters)
-- ARGV as reentrant_release: owner id, lease ms (unused: a simple lock has
-- one hold), channel prefix, publish command, hand-off lease ms, '1' when
-- the owner gives up waiting
-- Returns -1 when the owner does not hold the lock, 0 when released. A
-- release of a value without " w" only deletes the key; otherwise the
-- first live waiter gets the lock ("<waiter>[ w]", with the hand-off
-- lease) and a message "<waiter>" on its client's channel (a multi-lock
-- waiter, "<owner> <detail>", is woken to try again and the key deleted).
-- #include registry
local lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3]
local owner = ARGV[1]

if ARGV[6] == '1' then
  unregister(queue, waiters, owner)
end
local value = redis.call('get', lock)
if value == owner then
  redis.call('del', lock)
  return 0
end
if value ~= owner .. ' w' then
  return -1
end
hand_on(lock, queue, waiters, nil, false, tonumber(ARGV[5]), ARGV[3], ARGV[4])
return 0
