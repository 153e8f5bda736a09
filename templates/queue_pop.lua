-- queue_pop: a plain queue's take: up to n ready items, unless the queue
-- is paused (see queue_pause). It is LPOP with a pause check: at most
-- once, as LPOP is (a run again after a lost reply takes the next items;
-- those of the lost reply are gone, never delivered twice).
-- KEYS[1] ready: the queue's ready list (its key)
-- KEYS[2] paused: KEYS[1]..':paused', there while the queue is paused
-- ARGV[1] n: how many at most
-- reply: nil | {string...}
--   false when the queue is paused or has no ready item, else the items
--   taken, first ready first.
if redis.call('exists', KEYS[2]) == 1 then
  return false
end
return redis.call('lpop', KEYS[1], ARGV[1])
