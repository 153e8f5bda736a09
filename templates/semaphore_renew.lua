-- semaphore_renew: extend the lease of one hold of a semaphore (never
-- shorten it: a renewal that arrives late, sent with an older and shorter
-- lease, leaves a longer one alone), or set it (Permit.SetLease).
-- KEYS[1] holds: the holds (see semaphore_acquire)
-- KEYS[2] counts: the counts (see semaphore_acquire; a compact single
--   hold's lease is their TTL)
-- KEYS[3]? capacity: the capacity (unused)
-- KEYS[4]? queue: the waiter registry's wait queue (unused)
-- KEYS[5]? waiters: the waiter registry's deadlines (unused)
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] owner: the owner id
-- ARGV[3]? set: '1' to make the hold end lease_ms from now, shorter or
--   longer than it was; absent or '0' to extend it only
-- reply: int
--   1 when renewed, 0 when the owner holds nothing (evicted). A hold still
--   present is never counted as free, even past its expiry, so it may be
--   renewed.
local holds, counts = KEYS[1], KEYS[2]
local lease = ARGV[1]

if redis.call('zscore', holds, ARGV[2]) == false then
  -- The compact single hold (see semaphore_acquire) lives as long as
  -- the counts: their TTL is its lease.
  if redis.call('hget', counts, 's') ~= ARGV[2] then
    return 0
  end
  if ARGV[3] == '1' or redis.call('pttl', counts) < tonumber(lease) then
    redis.call('pexpire', counts, lease)
  end
  return 1
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[3] == '1' then
  redis.call('zadd', holds, now + lease, ARGV[2])
else
  redis.call('zadd', holds, 'GT', now + lease, ARGV[2])
end
for _, k in ipairs({holds, counts}) do
  if redis.call('pttl', k) < tonumber(lease) then
    redis.call('pexpire', k, lease)
  end
end
return 1
