-- queue_bury: put an item a plain queue's consumer could not decode on
-- the dead list, with the reason.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] body: the encoded item
-- ARGV[3] reason: why it is dead
-- ARGV[4] id: the dead letter's id, an operation id unique across clients
-- reply: string
--   The dead letter's id. A second run of the call finds its body there
--   and adds nothing.
local id = ARGV[4]
if redis.call('hsetnx', KEYS[3], id, ARGV[2]) == 0 then
  return id
end
redis.call('hset', KEYS[8], id, 1)
redis.call('hset', KEYS[10], id, ARGV[3])
redis.call('rpush', KEYS[9], id)
return id
