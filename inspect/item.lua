-- item: an operator's action on one item of a queue, named by its id
-- (lockgen inspect and the dashboard): remove it while it is ready,
-- delayed or dead; redrive it, a dead letter, to the end of the ready
-- list; or run it, a delayed item, now (to the end of the ready list, as
-- the delay timer moves a due item). Once per operation: a run again (a
-- reply lost, and go-redis sent it again) answers what the first answered.
-- The runtime's scripts (templates/queue_*.lua) keep the same layout; this
-- one is inspect's own, as the runtime has no call that acts on one item
-- by id and says where it was.
-- KEYS[1..10] ready, delayed, data, seq, armed, proc, inflight, att, dead, err:
--   the queue's keys, in the order of the runtime's queue scripts (ready
--   is the queue's key, the others its sub-keys)
-- KEYS[11] record: KEYS[1]..':op:'..op, "<was> 1" for a while after the
--   action changed the item
-- ARGV[1] mode: 'r' reliable (the lists hold ids, bodies live in data) or
--   'p' plain (the ready list holds bodies; delayed and dead items are ids)
-- ARGV[2] action: 'remove', 'redrive' or 'run-now'
-- ARGV[3] id: the item's id
-- ARGV[4] record_ms: how long the record lives
-- reply: {string, int}
--   Where the item was: 'ready', 'delayed', 'in-flight' (a delivery in
--   flight, or claimed by a Take that has not started it), 'dead', or ''
--   when no item has the id; and 1 when the action changed it, 0 when it
--   does not apply to an item there (nothing changed).
local rec = redis.call('get', KEYS[11])
if rec then
  local was, done = string.match(rec, '^(%S*) (%d)$')
  return {was, tonumber(done)}
end
local reliable, action, id = ARGV[1] == 'r', ARGV[2], ARGV[3]

local was = ''
if redis.call('zscore', KEYS[2], id) then
  was = 'delayed'
elseif redis.call('zscore', KEYS[7], id) or (reliable and redis.call('lpos', KEYS[6], id)) then
  was = 'in-flight'
elseif reliable and redis.call('lpos', KEYS[1], id) then
  was = 'ready'
elseif redis.call('lpos', KEYS[9], id) then
  was = 'dead'
end

-- ready puts the item at the end of the ready list: its id, or for a
-- plain queue its body (the item then has no id any more).
local function ready()
  if reliable then
    redis.call('rpush', KEYS[1], id)
    return
  end
  local body = redis.call('hget', KEYS[3], id)
  redis.call('hdel', KEYS[3], id)
  if body then
    redis.call('rpush', KEYS[1], body)
  end
end

local done = 0
if action == 'remove' and (was == 'ready' or was == 'delayed' or was == 'dead') then
  if was == 'ready' then
    redis.call('lrem', KEYS[1], 1, id)
  elseif was == 'delayed' then
    redis.call('zrem', KEYS[2], id)
  else
    redis.call('lrem', KEYS[9], 1, id)
  end
  redis.call('hdel', KEYS[3], id)
  redis.call('hdel', KEYS[8], id)
  redis.call('hdel', KEYS[10], id)
  done = 1
elseif action == 'redrive' and was == 'dead' then
  -- As queue_redrive: the delivery count starts over.
  redis.call('lrem', KEYS[9], 1, id)
  redis.call('hdel', KEYS[8], id)
  redis.call('hdel', KEYS[10], id)
  ready()
  done = 1
elseif action == 'run-now' and was == 'delayed' then
  -- As queue_move: a retried item keeps its delivery count.
  redis.call('zrem', KEYS[2], id)
  ready()
  done = 1
end
if done == 1 then
  redis.call('set', KEYS[11], was .. ' 1', 'px', ARGV[4])
end
return {was, done}
