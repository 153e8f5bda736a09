-- queue_bury: put an item a plain queue's consumer could not decode on
-- the dead list, with the reason.
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] the publish command (unused), ARGV[2] the encoded item, ARGV[3] reason
-- Returns the dead letter's id.
local t = redis.call('time')
local id = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)) .. '-' .. redis.call('incr', KEYS[4])
redis.call('pexpire', KEYS[4], 10000)
redis.call('hset', KEYS[3], id, ARGV[2])
redis.call('hset', KEYS[8], id, 1)
redis.call('hset', KEYS[10], id, ARGV[3])
redis.call('rpush', KEYS[9], id)
return id
