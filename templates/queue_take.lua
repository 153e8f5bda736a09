-- queue_take: claim a delivery of a reliable queue.
-- KEYS: the queue's keys (see templates/queues.go): 1 ready, 2 delayed,
-- 3 data, 4 seq, 5 armed, 6 proc, 7 inflight, 8 att, 9 dead, 10 err
-- ARGV[1] the publish command (the timer channel is KEYS[1]..':ch'), ARGV[2] visibility ms, ARGV[3] the id a blocking
-- move put on the proc list, or '' to take the first ready item
-- Returns false when there is nothing to claim (nothing ready, or the id
-- was already recovered by a delay timer), {id} when the id's item is
-- gone (take again), or {id, body, delivery number, deadline, now}.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[3]
if id == '' then
  id = redis.call('lpop', KEYS[1])
  if not id then
    return false
  end
elseif redis.call('lrem', KEYS[6], 1, id) == 0 then
  return false
end
local body = redis.call('hget', KEYS[3], id)
if not body then
  redis.call('zrem', KEYS[7], id)
  redis.call('hdel', KEYS[8], id)
  return {id}
end
local deadline = now + tonumber(ARGV[2])
redis.call('zadd', KEYS[7], deadline, id)
local n = redis.call('hincrby', KEYS[8], id, 1)

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
return {id, body, n, deadline, now}
