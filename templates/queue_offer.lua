-- queue_offer: add items to a queue, ready now or when due, once per
-- operation: a call that runs again (its reply was lost), or an offer
-- under a dedupe key offered already within its window, finds its record
-- and adds nothing.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- KEYS[12] record: the offer's record, KEYS[1]..':op:'..op, or
--   KEYS[1]..':key:'..key for an offer under a caller's dedupe key: "<due>
--   <first item's id>" while it lives
-- ARGV[1] publish: the command that publishes on the timer channel,
--   KEYS[1]..':ch', and wakes waiting consumers (publish or spublish)
-- ARGV[2] mode: 'r' reliable (lists hold ids and bodies live in data) or
--   'p' plain (the ready list holds bodies)
-- ARGV[3] delay_ms: the delay in milliseconds, or ''
-- ARGV[4] due_ms: the due time in unix milliseconds, or '' (a due time
--   not after now is ready now)
-- ARGV[5] op: the offer's operation id, unique across clients: the id of
--   its item, or "<op>-<i>" of its i-th item (from 1) when it has several
-- ARGV[6] record_ms: how long the record lives (a dedupe key's window)
-- ARGV[7...] items: the encoded items
-- reply: {int, string}
--   The due time (server clock, unix ms), or 0 when the items are ready
--   now, and the first item's id ('' for a plain queue's ready items,
--   which have none); the first offer's, when the record was there. An
--   item that becomes the earliest due one is announced on the channel,
--   so that every client's delay timer re-arms. Items ready now wake as
--   many waiting consumers (see queue_wake in queue.luainc).
-- #include queue
-- The server's clock is read only for a due time (an offer of ready
-- items needs none; queue_wake reads it when someone waits).
local now, due = nil, 0
if ARGV[3] ~= '' or ARGV[4] ~= '' then
  local t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if ARGV[3] ~= '' then
    -- Rounded up, so that an item is never due before its delay has passed.
    due = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000) + tonumber(ARGV[3])
  else
    due = tonumber(ARGV[4])
  end
end
local delayed = now ~= nil and due > now
if not delayed then
  due = 0
end
local byId = ARGV[2] == 'r' or delayed
local op, many = ARGV[5], #ARGV > 7
local id1 = ''
if byId then
  id1 = many and op .. '-1' or op
end
local first = redis.call('set', KEYS[12], due .. ' ' .. id1, 'NX', 'PX', ARGV[6], 'GET')
if first then -- this offer ran already, or its key was offered
  local d, id = string.match(first, '^(%d+) ?(.*)$')
  return {tonumber(d), id}
end
for i = 7, #ARGV do
  local item = ARGV[i]
  if byId then
    local id = op
    if many then
      id = op .. '-' .. (i - 6)
    end
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
  queue_wake(KEYS[1], KEYS[11], ARGV[1], #ARGV - 6, now)
  return {0, id1}
end
local armed = redis.call('get', KEYS[5])
if not armed or due < tonumber(armed) then
  redis.call('set', KEYS[5], due, 'px', due - now + 1000)
  redis.call(ARGV[1], KEYS[1] .. ':ch', due)
end
return {due, id1}
