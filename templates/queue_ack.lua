-- queue_ack: acknowledge a delivery of a reliable queue; the item is done.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] id: the item's id
-- ARGV[3] delivery: the delivery number
-- ARGV[4]? retention_ms: '' or absent for none; a queue with retention
--   keeps the items, done, for inspection: "<id>\n<done ms>\n<delivery>\n<body>"
--   pushed on KEYS[1]..':done' (newest first), which lives retention_ms
--   after the last Ack (five commands more: TIME, HGET (HMGET for
--   several), LPUSH, LTRIM, PEXPIRE)
-- ARGV[5]? max: how many done items it keeps at most (with retention)
-- ARGV[6...] more: more deliveries, an id and a delivery number each
--   (ReliableQueue.AckAll)
-- reply: int | {int...}
--   One delivery: 1 when acknowledged, 0 when the delivery is no longer in
--   flight (its visibility timeout ran out and it was delivered again, or
--   it was acknowledged already). A first delivery costs 5 commands
--   (EVALSHA, HGET, ZREM, HDEL, HDEL). Several: that number for each, in
--   order, for 6 or 7 commands in all (EVALSHA, HMGET, ZMSCORE, ZREM,
--   HDEL, HDEL, and an HDEL of the reasons when one was delivered again).
--   Running it again acknowledges nothing more (it answers 0).
-- retain keeps the acknowledged ids (at deliveries ns) done, for the
-- retention the call asks (see the header): read before their bodies
-- are deleted.
local function retain(ids, ns)
  if not ARGV[4] or ARGV[4] == '' then
    return
  end
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local bodies
  if #ids == 1 then
    bodies = {redis.call('hget', KEYS[3], ids[1])}
  else
    bodies = redis.call('hmget', KEYS[3], unpack(ids))
  end
  local items = {}
  for i, id in ipairs(ids) do
    items[i] = id .. '\n' .. now .. '\n' .. ns[i] .. '\n' .. (bodies[i] or '')
  end
  local done = KEYS[1] .. ':done'
  redis.call('lpush', done, unpack(items))
  redis.call('ltrim', done, 0, tonumber(ARGV[5]) - 1)
  redis.call('pexpire', done, ARGV[4])
end

if #ARGV > 5 then
  local ids, want = {ARGV[2]}, {ARGV[3]}
  for i = 6, #ARGV - 1, 2 do
    ids[#ids + 1] = ARGV[i]
    want[#want + 1] = ARGV[i + 1]
  end
  local atts = redis.call('hmget', KEYS[8], unpack(ids))
  local live = redis.call('zmscore', KEYS[7], unpack(ids))
  local done, dns, again, out, seen = {}, {}, {}, {}, {}
  for i, id in ipairs(ids) do
    out[i] = 0
    if atts[i] == want[i] and live[i] and not seen[id] then -- (an id twice counts once)
      out[i] = 1
      seen[id] = true
      done[#done + 1] = id
      dns[#dns + 1] = want[i]
      if want[i] ~= '1' then
        again[#again + 1] = id
      end
    end
  end
  if #done > 0 then
    retain(done, dns)
    redis.call('zrem', KEYS[7], unpack(done))
    redis.call('hdel', KEYS[3], unpack(done))
    redis.call('hdel', KEYS[8], unpack(done))
    if #again > 0 then
      redis.call('hdel', KEYS[10], unpack(again))
    end
  end
  return out
end
local id = ARGV[2]
if redis.call('hget', KEYS[8], id) ~= ARGV[3] or redis.call('zrem', KEYS[7], id) == 0 then
  return 0
end
retain({id}, {ARGV[3]})
redis.call('hdel', KEYS[3], id)
redis.call('hdel', KEYS[8], id)
if ARGV[3] ~= '1' then
  -- A reason is recorded by a give-back (queue_nack), after which the
  -- item is delivered again; a re-drive deletes it with the count.
  redis.call('hdel', KEYS[10], id)
end
return 1
