-- queue_ack: acknowledge a delivery of a reliable queue; the item is done.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] id: the item's id
-- ARGV[3] delivery: the delivery number
-- ARGV[4]? reserved: '' (the queueops branch's retention_ms)
-- ARGV[5]? reserved: '' (the queueops branch's max)
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
if #ARGV > 5 then
  local ids, want = {ARGV[2]}, {ARGV[3]}
  for i = 6, #ARGV - 1, 2 do
    ids[#ids + 1] = ARGV[i]
    want[#want + 1] = ARGV[i + 1]
  end
  local atts = redis.call('hmget', KEYS[8], unpack(ids))
  local live = redis.call('zmscore', KEYS[7], unpack(ids))
  local done, again, out, seen = {}, {}, {}, {}
  for i, id in ipairs(ids) do
    out[i] = 0
    if atts[i] == want[i] and live[i] and not seen[id] then -- (an id twice counts once)
      out[i] = 1
      seen[id] = true
      done[#done + 1] = id
      if want[i] ~= '1' then
        again[#again + 1] = id
      end
    end
  end
  if #done > 0 then
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
redis.call('hdel', KEYS[3], id)
redis.call('hdel', KEYS[8], id)
if ARGV[3] ~= '1' then
  -- A reason is recorded by a give-back (queue_nack), after which the
  -- item is delivered again; a re-drive deletes it with the count.
  redis.call('hdel', KEYS[10], id)
end
return 1
