-- queue_offer: add items to a queue, ready now or when due.
-- KEYS[1..10] ready, delayed, data, seq, armed, proc, inflight, att, dead, err:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the command that publishes on the timer channel,
--   KEYS[1]..':ch' (publish or spublish)
-- ARGV[2] mode: 'r' reliable (lists hold ids and bodies live in data) or
--   'p' plain (the ready list holds bodies)
-- ARGV[3] delay_ms: the delay in milliseconds, or ''
-- ARGV[4] due_ms: the due time in unix milliseconds, or ''
-- ARGV[5...] items: the encoded items
-- reply: int
--   The due time (server clock, unix ms), or 0 when the items are ready
--   now. An item that becomes the earliest due one is announced on the
--   channel, so that every client's delay timer re-arms.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = 0
if ARGV[3] ~= '' then
  -- Rounded up, so that an item is never due before its delay has passed.
  due = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000) + tonumber(ARGV[3])
elseif ARGV[4] ~= '' then
  due = tonumber(ARGV[4])
end
local delayed = due > now
local byId = ARGV[2] == 'r' or delayed

-- Ids are "<now>-<n>": seq counts the ids given out and expires after
-- 10s without one, so a counter that starts again never repeats an id
-- (its ids carry a later time).
local stamp = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)) .. '-'
local n = 0
if byId then
  n = redis.call('incrby', KEYS[4], #ARGV - 4) - (#ARGV - 4)
  redis.call('pexpire', KEYS[4], 10000)
end
for i = 5, #ARGV do
  local item = ARGV[i]
  if byId then
    n = n + 1
    local id = stamp .. n
    redis.call('hset', KEYS[3], id, item)
    item = id
  end
  if delayed then
    redis.call('zadd', KEYS[2], due, item)
  else
    redis.call('rpush', KEYS[1], item)
  end
end
if not delayed then
  return 0
end
local armed = redis.call('get', KEYS[5])
if not armed or due < tonumber(armed) then
  redis.call('set', KEYS[5], due, 'px', due - now + 1000)
  redis.call(ARGV[1], KEYS[1] .. ':ch', due)
end
return due
