-- queue_remove: remove ready and delayed items equal to a value, compared
-- by the codec's bytes inside the item envelope (runtime/codec.go): a 0
-- byte, the envelope's version, the codec's tag, then for version 2 a
-- carrier section (its length as a uvarint, then the section), then the
-- codec's bytes. Items without the 0 byte predate the envelope and are
-- compared whole; a carrier (a trace context) does not matter.
-- Items in flight and dead letters are left alone.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- KEYS[12] record: this call's record, KEYS[1]..':op:'..op (op unique
--   across clients): its reply, for record_ms
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] mode: 'r' reliable (the ready list holds ids) or 'p' plain (it
--   holds bodies)
-- ARGV[3] value: the codec's bytes of the value
-- ARGV[4] tag: the codec's tag
-- ARGV[5] n: how many to remove at most (0: all), ready ones first, then
--   delayed ones by due time
-- ARGV[6] resent: '' when the call is sent the first time, '!' when it
--   is sent again (go-redis writes it so: a lost reply, a redirect, the
--   EVAL after NOSCRIPT); only then is the record read
-- ARGV[7] record_ms: how long the record lives
-- reply: int
--   How many were removed. It reads every ready and delayed item (until
--   the limit is reached): O(N). A second run of the call answers the
--   first run's count and removes nothing (one SET, two commands on a
--   resend).
if ARGV[6] == '!' then -- it may have run: answer as it did
  local prev = redis.call('get', KEYS[12])
  if prev then
    return tonumber(prev)
  end
end
local want, tag, limit = ARGV[3], ARGV[4], tonumber(ARGV[5])
local reliable = ARGV[2] == 'r'

-- #include queue

-- equal reports whether an item holds the value.
local function equal(item)
  return queue_holds(item, want, tag)
end

local removed = 0
local function full()
  return limit > 0 and removed >= limit
end

-- Ready items, in batches, first ready first.
local first = 0
while not full() do
  local items = redis.call('lrange', KEYS[1], first, first + 999)
  if #items == 0 then
    break
  end
  local bodies = items
  if reliable then
    bodies = redis.call('hmget', KEYS[3], unpack(items))
  end
  local kept = #items
  for i, item in ipairs(items) do
    if not full() and equal(bodies[i]) then
      -- Ids are unique; equal bodies are interchangeable, so removing
      -- the first occurrence of one removes this one or its twin before it.
      redis.call('lrem', KEYS[1], 1, item)
      if reliable then
        redis.call('hdel', KEYS[3], item)
        redis.call('hdel', KEYS[8], item)
        redis.call('hdel', KEYS[10], item)
      end
      removed = removed + 1
      kept = kept - 1
    end
  end
  first = first + kept
end

-- Delayed items (known by id in both modes), in batches, due first first.
first = 0
while not full() do
  local ids = redis.call('zrange', KEYS[2], first, first + 999)
  if #ids == 0 then
    break
  end
  local bodies = redis.call('hmget', KEYS[3], unpack(ids))
  local kept = #ids
  for i, id in ipairs(ids) do
    if not full() and equal(bodies[i]) then
      redis.call('zrem', KEYS[2], id)
      redis.call('hdel', KEYS[3], id)
      if reliable then
        redis.call('hdel', KEYS[8], id)
        redis.call('hdel', KEYS[10], id)
      end
      removed = removed + 1
      kept = kept - 1
    end
  end
  first = first + kept
end
redis.call('set', KEYS[12], removed, 'PX', ARGV[7])
return removed
