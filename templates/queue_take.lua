-- queue_take: claim deliveries of a reliable queue, each put in flight
-- with the same visibility deadline.
-- KEYS[1..10] ready, delayed, data, seq, armed, proc, inflight, att, dead, err:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the command that publishes on the timer channel,
--   KEYS[1]..':ch' (publish or spublish)
-- ARGV[2] visibility_ms: the visibility timeout in milliseconds
-- ARGV[3] id: the id a blocking move put on the proc list, or '' to take
--   the first ready item
-- ARGV[4] n: how many to claim at most (the id first, then the first
--   ready items)
-- reply: nil | {int, int, any...}
--   false when there is nothing to claim (nothing ready, and the id was ''
--   or already recovered by a delay timer), or {deadline, now, id, body,
--   delivery number, id, body, delivery number, ...}. An id whose item is
--   gone (acknowledged meanwhile) is cleaned up and passed over.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + tonumber(ARGV[2])
local want = tonumber(ARGV[4])
local out = {deadline, now}
local claimed = 0

local function claim(id)
  local body = redis.call('hget', KEYS[3], id)
  if not body then
    redis.call('zrem', KEYS[7], id)
    redis.call('hdel', KEYS[8], id)
    return
  end
  redis.call('zadd', KEYS[7], deadline, id)
  out[#out + 1] = id
  out[#out + 1] = body
  out[#out + 1] = redis.call('hincrby', KEYS[8], id, 1)
  claimed = claimed + 1
end

if ARGV[3] ~= '' and redis.call('lrem', KEYS[6], 1, ARGV[3]) > 0 then
  claim(ARGV[3])
end
while claimed < want do
  local ids = redis.call('lpop', KEYS[1], want - claimed)
  if not ids then
    break
  end
  for _, id in ipairs(ids) do
    claim(id)
  end
end
if claimed == 0 then
  return false
end

-- Ids other consumers moved but have not claimed yet get a deadline too:
-- if such a consumer died, its id comes back; if not, its claim resets it.
for _, other in ipairs(redis.call('lrange', KEYS[6], 0, -1)) do
  if not redis.call('zscore', KEYS[7], other) then
    redis.call('zadd', KEYS[7], deadline, other)
  end
end
local armed = redis.call('get', KEYS[5])
if not armed or deadline < tonumber(armed) then
  redis.call('set', KEYS[5], deadline, 'px', deadline - now + 1000)
  redis.call(ARGV[1], KEYS[1] .. ':ch', deadline)
end
return out
