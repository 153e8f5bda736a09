-- queue_take: claim deliveries of a reliable queue, each put in flight
-- with the same visibility deadline.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the command that publishes on the timer channel,
--   KEYS[1]..':ch', and wakes waiting consumers (publish or spublish)
-- ARGV[2] visibility_ms: the visibility timeout in milliseconds
-- ARGV[3] id: the id a blocking move put on the proc list, or '' to take
--   the first ready item
-- ARGV[4] n: how many to claim at most (the id first, then the first
--   ready items)
-- ARGV[5]? op: the claim's operation id, '!' appended when the call is
--   sent again (a lost reply): then its record, when there is one, is
--   the reply, with the bodies read again
-- ARGV[6]? owner: a consumer that waits when there is nothing to claim:
--   it is then registered in takers (see queue_wait), and taken out when
--   it claims
-- ARGV[7]? registered: '1' when the consumer may still be registered
--   from an earlier call (its entry is taken out when it claims)
-- KEYS[12]? record: the claim's record, KEYS[1]..':op:'..op: "<deadline>
--   <now> <id> <n> ...", living as long as the visibility timeout
-- reply: nil | {int, int, any...}
--   false when there is nothing to claim (nothing ready, and the id was ''
--   or already recovered by a delay timer; with an owner, it is then
--   registered), or {deadline, now, id, body,
--   delivery number, id, body, delivery number, ...}. An id whose item is
--   gone (acknowledged meanwhile) is cleaned up and passed over. A claim
--   that ran already answers its record. A paused queue (its key
--   KEYS[1]..':paused' is there, see queue_pause) claims nothing.
-- #include queue
if ARGV[5] and string.sub(ARGV[5], -1) == '!' then
  local rec = redis.call('get', KEYS[12])
  if rec then -- this claim ran already: its deliveries again
    local f = {}
    for w in string.gmatch(rec, '%S+') do
      f[#f + 1] = w
    end
    local out = {tonumber(f[1]), tonumber(f[2])}
    for i = 3, #f - 1, 2 do
      local body = redis.call('hget', KEYS[3], f[i])
      if body then
        out[#out + 1] = f[i]
        out[#out + 1] = body
        out[#out + 1] = tonumber(f[i + 1])
      end
    end
    if #out == 2 then
      return false
    end
    return out
  end
end
local now = queue_now_ms()
local deadline = now + tonumber(ARGV[2])
local want = tonumber(ARGV[4])
local out = {deadline, now}
local claimed = 0
if redis.call('exists', KEYS[1] .. ':paused') == 1 then
  want = 0 -- paused: claim nothing, and wait
end

-- claim puts ids in flight, in order: those whose body is gone
-- (acknowledged meanwhile) are cleaned up and passed over. A batch costs
-- the same few commands however many ids it has (HMGET of the bodies and
-- of the delivery counts, one HSET of the counts, one ZADD).
local function claim(ids)
  local bodies = redis.call('hmget', KEYS[3], unpack(ids))
  local live, lbodies = {}, {}
  for i, id in ipairs(ids) do
    if bodies[i] then
      live[#live + 1] = id
      lbodies[#lbodies + 1] = bodies[i]
    else
      redis.call('zrem', KEYS[7], id)
      redis.call('hdel', KEYS[8], id)
    end
  end
  if #live == 0 then
    return
  end
  local ns, zargs = {}, {}
  if #live == 1 then
    ns[1] = redis.call('hincrby', KEYS[8], live[1], 1)
  else
    local prev = redis.call('hmget', KEYS[8], unpack(live))
    local hargs = {}
    for i, id in ipairs(live) do
      ns[i] = (tonumber(prev[i]) or 0) + 1
      hargs[#hargs + 1] = id
      hargs[#hargs + 1] = ns[i]
    end
    redis.call('hset', KEYS[8], unpack(hargs))
  end
  for i, id in ipairs(live) do
    zargs[#zargs + 1] = deadline
    zargs[#zargs + 1] = id
    out[#out + 1] = id
    out[#out + 1] = lbodies[i]
    out[#out + 1] = ns[i]
  end
  redis.call('zadd', KEYS[7], unpack(zargs))
  claimed = claimed + #live
end

if want > 0 and ARGV[3] ~= '' and redis.call('lrem', KEYS[6], 1, ARGV[3]) > 0 then
  claim({ARGV[3]})
end
while claimed < want do
  local ids = redis.call('lpop', KEYS[1], want - claimed)
  if not ids then
    break
  end
  claim(ids)
end
if claimed == 0 then
  if ARGV[6] and ARGV[6] ~= '' then
    queue_register(KEYS[11], ARGV[6], now)
  end
  return false
end
if ARGV[7] == '1' then
  redis.call('zrem', KEYS[11], ARGV[6])
end

-- (Ids an older runtime's blocking move put on the proc list and no
-- consumer claimed get a deadline from the delay timer's move.)
local armed = redis.call('get', KEYS[5])
if not armed or deadline < tonumber(armed) then
  redis.call('set', KEYS[5], deadline, 'px', deadline - now + 1000)
  redis.call(ARGV[1], KEYS[1] .. ':ch', deadline)
end
if ARGV[5] then
  local rec = {deadline, now}
  for i = 3, #out, 3 do
    rec[#rec + 1] = out[i]
    rec[#rec + 1] = out[i + 2]
  end
  redis.call('set', KEYS[12], table.concat(rec, ' '), 'PX', ARGV[2])
end
return out
