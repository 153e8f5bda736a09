-- queue_item: an action on one item of a queue, named by its id (the
-- runtime's RunNow, BuryID and RedriveID, lockgen inspect and the
-- dashboard): remove it while it is ready, delayed or dead; run it, a
-- delayed or retrying item, now (to the end of the ready list, as the
-- delay timer moves a due item); bury it, a ready or delayed item, on
-- the dead list with a reason; or redrive it, a dead letter, to the end
-- of the ready list with its delivery count reset. An item made ready
-- wakes one waiting consumer. Once per operation: a run again (a reply
-- lost, and go-redis sent it again) answers what the first answered.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- KEYS[12] record: KEYS[1]..':op:'..op, "<was> 1" for record_ms after the
--   action changed the item
-- ARGV[1] publish: the command that publishes wake-ups (publish or
--   spublish)
-- ARGV[2] mode: 'r' reliable (the lists hold ids, bodies live in data) or
--   'p' plain (the ready list holds bodies; delayed and dead items are ids)
-- ARGV[3] action: 'remove', 'run-now', 'bury' or 'redrive'
-- ARGV[4] id: the item's id
-- ARGV[5] reason: a bury's reason, kept as the dead letter's
-- ARGV[6] record_ms: how long the record lives
-- reply: {string, int}
--   Where the item was: 'ready', 'delayed', 'in-flight' (a delivery in
--   flight, or claimed by a Take that has not started it), 'dead', or ''
--   when no item has the id; and 1 when the action changed it, 0 when it
--   does not apply to an item there (nothing changed).
-- #include queue
local rec = redis.call('get', KEYS[12])
if rec then
  local was, done = string.match(rec, '^(%S*) (%d)$')
  return {was, tonumber(done)}
end
local reliable, action, id = ARGV[2] == 'r', ARGV[3], ARGV[4]

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

-- ready puts the item at the end of the ready list (its id, or for a
-- plain queue its body: the item then has no id any more) and wakes one
-- waiting consumer.
local function ready()
  if reliable then
    redis.call('rpush', KEYS[1], id)
  else
    local body = redis.call('hget', KEYS[3], id)
    redis.call('hdel', KEYS[3], id)
    if not body then
      return
    end
    redis.call('rpush', KEYS[1], body)
  end
  queue_wake(KEYS[1], KEYS[11], ARGV[1], 1, nil)
end

-- unlist takes the item off the list or set it is on.
local function unlist()
  if was == 'ready' then
    redis.call('lrem', KEYS[1], 1, id)
  elseif was == 'delayed' then
    redis.call('zrem', KEYS[2], id)
  else
    redis.call('lrem', KEYS[9], 1, id)
  end
end

local done = 0
if action == 'remove' and (was == 'ready' or was == 'delayed' or was == 'dead') then
  unlist()
  redis.call('hdel', KEYS[3], id)
  redis.call('hdel', KEYS[8], id)
  redis.call('hdel', KEYS[10], id)
  done = 1
elseif action == 'run-now' and was == 'delayed' then
  -- As queue_move: a retried item keeps its delivery count.
  unlist()
  ready()
  done = 1
elseif action == 'bury' and (was == 'ready' or was == 'delayed') then
  unlist()
  redis.call('hset', KEYS[10], id, ARGV[5])
  if redis.call('hexists', KEYS[8], id) == 0 then
    redis.call('hset', KEYS[8], id, 0)
  end
  redis.call('rpush', KEYS[9], id)
  done = 1
elseif action == 'redrive' and was == 'dead' then
  -- As queue_redrive: the delivery count starts over.
  unlist()
  redis.call('hdel', KEYS[8], id)
  redis.call('hdel', KEYS[10], id)
  ready()
  done = 1
end
if done == 1 then
  redis.call('set', KEYS[12], was .. ' 1', 'px', ARGV[6])
end
return {was, done}
