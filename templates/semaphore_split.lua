-- semaphore_split: turn one hold of n permits into n holds of one permit
-- each, with the same expiry: the owner keeps one, and each new owner
-- gets one, so that each can be released (or lost) alone. The permits
-- held in all do not change, so nobody is woken.
-- KEYS[1] holds: the holds (see semaphore_acquire)
-- KEYS[2] counts: the counts (see semaphore_acquire)
-- ARGV[1] owner: the owner id of the hold
-- ARGV[2...] new_owners: n - 1 owner ids, not in use
-- reply: int
--   1 when split (also when a run of this call split it already: its new
--   owners hold their permits), 0 when the owner holds nothing live, or
--   -1 when it holds another number of permits than the new owners and
--   itself.
local holds, counts, owner = KEYS[1], KEYS[2], ARGV[1]
if redis.call('hexists', counts, ARGV[2]) == 1 then
  return 1 -- split by an earlier run of this call (its reply was lost)
end
local exp = tonumber(redis.call('zscore', holds, owner))
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not exp or exp <= now then
  return 0
end
if tonumber(redis.call('hget', counts, owner)) ~= #ARGV then
  return -1
end
local zargs, hargs = {}, {owner, 1}
for i = 2, #ARGV do
  zargs[#zargs + 1] = exp
  zargs[#zargs + 1] = ARGV[i]
  hargs[#hargs + 1] = ARGV[i]
  hargs[#hargs + 1] = 1
end
redis.call('zadd', holds, unpack(zargs))
redis.call('hset', counts, unpack(hargs))
return 1
