-- rw_renew: extend the lease of one side of a read-write lock held by owner,
-- without touching the other holds' leases.
-- KEYS[1] lock: the lock hash (a compact single hold, see rw_acquire, is
--   this key alone, its lease the key's TTL)
-- KEYS[2] holds: the holds' deadlines (see rw_acquire)
-- KEYS[3]? queue: the waiter registry's wait queue (unused)
-- KEYS[4]? waiters: the waiter registry's deadlines (unused)
-- ARGV[1] lease_ms: the lease in milliseconds
-- ARGV[2] owner: the owner id
-- ARGV[3] side: r or w
-- reply: int
--   1 when renewed, 0 when the owner no longer holds that side.
local lock, deadlines = KEYS[1], KEYS[2]
local lease, owner, side = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local member = 'r:' .. owner
if side == 'w' then
  if redis.call('hget', lock, 'writer') ~= owner then
    return 0
  end
  member = 'w'
elseif redis.call('hexists', lock, member) == 0 then
  return 0
end
local deadline = redis.call('zscore', deadlines, member)
if not deadline and redis.call('hget', lock, 's') == member then
  -- The compact single hold (see rw_first): its lease is the lock's TTL.
  redis.call('pexpire', lock, ARGV[1])
  return 1
end
if not deadline or tonumber(deadline) <= now then
  return 0 -- ran out: the next script that runs drops it
end
redis.call('zadd', deadlines, now + lease, member)
local last = redis.call('zrange', deadlines, -1, -1, 'withscores')
local keep = tonumber(last[2]) - now
redis.call('pexpire', lock, keep)
redis.call('pexpire', deadlines, keep)
return 1
