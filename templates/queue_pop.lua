-- queue_pop: a plain queue's take: up to n ready items, unless the queue
-- is paused (see queue_pause). It is LPOP with a pause check: at most
-- once, as LPOP is (a run again after a lost reply takes the next items;
-- those of the lost reply are gone, never delivered twice). With an
-- owner, a blocking Take's consumer that finds nothing waits in the same
-- call: it is registered in takers (as queue_wait registers it), and one
-- that takes is taken out of takers when it may be registered from an
-- earlier call.
-- KEYS[1] ready: the queue's ready list (its key)
-- KEYS[2] paused: KEYS[1]..':paused', there while the queue is paused
-- KEYS[3]? takers: the queue's waiting consumers (KEYS[11] of the queue
--   scripts that take eleven keys), with an owner
-- ARGV[1] n: how many at most
-- ARGV[2]? owner: the waiting consumer, "<clientID>:<n>"
-- ARGV[3]? registered: '1' when the consumer may still be registered
--   from an earlier call
-- reply: nil | {string...}
--   false when the queue is paused or has no ready item (with an owner,
--   it is then registered for taker_ttl), else the items taken, first
--   ready first. Run again, a registration only moves its deadline.
-- #include queue
local owner = ARGV[2]
if redis.call('exists', KEYS[2]) == 0 then
  local items = redis.call('lpop', KEYS[1], ARGV[1])
  if items or not owner then
    if items and ARGV[3] == '1' then
      redis.call('zrem', KEYS[3], owner)
    end
    return items
  end
elseif not owner then
  return false
end
queue_register(KEYS[3], owner, nil)
return false
