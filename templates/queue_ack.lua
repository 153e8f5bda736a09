-- queue_ack: acknowledge a delivery of a reliable queue; the item is done.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] id: the item's id
-- ARGV[3] delivery: the delivery number
-- ARGV[4]? retention_ms: a queue with retention keeps the item, done,
--   for inspection: "<id>\n<done ms>\n<delivery>\n<body>" pushed on
--   KEYS[1]..':done' (newest first), which lives retention_ms after the
--   last Ack (five commands more: TIME, HGET, LPUSH, LTRIM, PEXPIRE)
-- ARGV[5]? max: how many done items it keeps at most
-- reply: int
--   1 when acknowledged, 0 when the delivery is no longer in flight (its
--   visibility timeout ran out and it was delivered again, or it was
--   acknowledged already).
local id = ARGV[2]
if redis.call('hget', KEYS[8], id) ~= ARGV[3] or not redis.call('zscore', KEYS[7], id) then
  return 0
end
redis.call('zrem', KEYS[7], id)
if ARGV[4] then -- retention
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local done = KEYS[1] .. ':done'
  redis.call('lpush', done, id .. '\n' .. now .. '\n' .. ARGV[3] .. '\n' .. (redis.call('hget', KEYS[3], id) or ''))
  redis.call('ltrim', done, 0, tonumber(ARGV[5]) - 1)
  redis.call('pexpire', done, ARGV[4])
end
redis.call('hdel', KEYS[3], id)
redis.call('hdel', KEYS[8], id)
redis.call('hdel', KEYS[10], id)
return 1
