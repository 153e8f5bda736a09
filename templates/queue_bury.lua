-- queue_bury: put an item a plain queue's consumer could not decode on
-- the dead list, with the reason.
-- KEYS[1..10] ready, delayed, data, seq, armed, proc, inflight, att, dead, err:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] body: the encoded item
-- ARGV[3] reason: why it is dead
-- reply: string
--   The dead letter's id.
local t = redis.call('time')
local id = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)) .. '-' .. redis.call('incr', KEYS[4])
redis.call('pexpire', KEYS[4], 10000)
redis.call('hset', KEYS[3], id, ARGV[2])
redis.call('hset', KEYS[8], id, 1)
redis.call('hset', KEYS[10], id, ARGV[3])
redis.call('rpush', KEYS[9], id)
return id
