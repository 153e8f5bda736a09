-- semaphore_lease: how long one hold of a semaphore has left of its lease,
-- on the server's clock. It only reads.
-- KEYS[1] holds: the holds (see semaphore_acquire)
-- KEYS[2]? counts: the counts (see semaphore_acquire: a compact single
--   hold's lease is their TTL)
-- ARGV[1] owner: the owner id
-- reply: int
--   The milliseconds left (0 when the lease ran out and the hold was not
--   evicted yet), or -1 when the owner holds nothing.
local exp = redis.call('zscore', KEYS[1], ARGV[1])
if not exp then
  if KEYS[2] and redis.call('hget', KEYS[2], 's') == ARGV[1] then
    return math.max(redis.call('pttl', KEYS[2]), 0)
  end
  return -1
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return math.max(tonumber(exp) - now, 0)
