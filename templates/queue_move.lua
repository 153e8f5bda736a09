-- queue_move: the delay timer's step. Moves due items (delayed ones, and
-- for a reliable queue the deliveries whose visibility timeout ran out) to
-- the ready list, at most a batch of each, and returns when to run next.
-- A delivery that ran out after max deliveries goes to the dead list.
-- "armed" records the earliest due time every live timer is armed for:
-- an item due earlier must be announced on the channel. It expires a
-- second after that time, so it never outlives the clients.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the command that publishes on the timer channel,
--   KEYS[1]..':ch', and wakes waiting consumers (publish or spublish)
-- ARGV[2] mode: 'r' reliable, 'p' plain
-- ARGV[3] batch: the batch size
-- ARGV[4] visibility_ms: the visibility timeout in milliseconds
-- ARGV[5] max_deliveries: deliveries before an item is dead
-- ARGV[6]? lateness: '1' to report lateness
-- reply: {int, int, int, int, int...}
--   {now, next due or -1, items moved, 1 when a batch was full}, followed
--   with ARGV[6] by how late each delayed item moved was (now minus its
--   due time, ms).
-- #include queue
local now = queue_now_ms()
local reliable = ARGV[2] == 'r'
local batch = tonumber(ARGV[3])
local full = 0

local due = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'withscores', 'limit', 0, batch)
local ids, late = {}, {}
local ready_n = 0 -- items put on the ready list
for i = 1, #due, 2 do
  ids[#ids + 1] = due[i]
  late[#late + 1] = now - tonumber(due[i + 1])
end
for _, id in ipairs(ids) do
  if reliable then
    redis.call('rpush', KEYS[1], id)
    ready_n = ready_n + 1
  else
    local body = redis.call('hget', KEYS[3], id)
    if body then
      redis.call('rpush', KEYS[1], body)
      redis.call('hdel', KEYS[3], id)
      ready_n = ready_n + 1
    end
  end
end
if #ids > 0 then
  redis.call('zrem', KEYS[2], unpack(ids))
end
if #ids == batch then
  full = 1
end
local moved = #ids

if reliable then
  local max = tonumber(ARGV[5])
  local expired = redis.call('zrangebyscore', KEYS[7], '-inf', now, 'limit', 0, batch)
  for _, id in ipairs(expired) do
    redis.call('lrem', KEYS[6], 0, id)
    local n = tonumber(redis.call('hget', KEYS[8], id) or '0')
    if n >= max then
      redis.call('hset', KEYS[10], id, 'not acknowledged within the visibility timeout (' .. n .. ' deliveries)')
      redis.call('rpush', KEYS[9], id)
    else
      redis.call('rpush', KEYS[1], id)
      ready_n = ready_n + 1
    end
  end
  if #expired > 0 then
    redis.call('zrem', KEYS[7], unpack(expired))
  end
  if #expired == batch then
    full = 1
  end
  moved = moved + #expired
  -- Ids a blocking move handed to a consumer that never claimed them (it
  -- died in between) get a visibility deadline, so they come back.
  local vis = tonumber(ARGV[4])
  for _, id in ipairs(redis.call('lrange', KEYS[6], 0, -1)) do
    if not redis.call('zscore', KEYS[7], id) then
      redis.call('zadd', KEYS[7], now + vis, id)
    end
  end
end

-- Each item made ready wakes one waiting consumer.
queue_wake(KEYS[1], KEYS[11], ARGV[1], ready_n, now)

local next = -1
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] then
  next = tonumber(first[2])
end
if reliable then
  first = redis.call('zrange', KEYS[7], 0, 0, 'withscores')
  if first[2] and (next < 0 or tonumber(first[2]) < next) then
    next = tonumber(first[2])
  end
end
local armed = redis.call('get', KEYS[5])
if next < 0 then
  redis.call('del', KEYS[5])
else
  redis.call('set', KEYS[5], next, 'px', math.max(next - now, 0) + 1000)
  if not armed or next < tonumber(armed) then
    redis.call(ARGV[1], KEYS[1] .. ':ch', next)
  end
end
local reply = {now, next, moved, full}
if ARGV[6] == '1' then
  for _, l in ipairs(late) do
    reply[#reply + 1] = l
  end
end
return reply
