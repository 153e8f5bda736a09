-- semaphore_capacity: change a semaphore's capacity (an operator's call)
-- and hand permits on to the waiters it lets proceed. 'set' stores the
-- capacity, for ttl_ms when given, else without expiry; 'tryset' does so
-- only when no capacity is stored; 'add' changes it, keeping its expiry
-- unless ttl_ms is given; 'reset' deletes it. Once the key is gone
-- (reset, or expired) the spec's capacity applies again.
-- KEYS[1] capacity: the capacity
-- KEYS[2] holds: the holds (see semaphore_acquire)
-- KEYS[3] counts: the counts (see semaphore_acquire)
-- KEYS[4] queue: the waiter registry's wait queue (members "<owner> <n>")
-- KEYS[5] waiters: the waiter registry's deadlines
-- ARGV[1] mode: 'set', 'tryset', 'add' or 'reset'
-- ARGV[2] value: the new capacity ('set', 'tryset') or the change ('add')
-- ARGV[3] spec_capacity: the spec's capacity
-- ARGV[4] prefix: the wake-up channel prefix
-- ARGV[5] publish: the publish command (publish or spublish)
-- ARGV[6] handoff_ms: the hand-off lease in milliseconds
-- ARGV[7]? op: the call's operation id, unique across clients, recorded
--   after the capacity ("<capacity>[e] <op>,...", the last four; 'e'
--   when the key expires): a call that finds it recorded ran already (its
--   reply was lost) and answers the capacity
-- ARGV[8]? ttl_ms: how long the capacity stored lasts (absent: 'set' and
--   'tryset' store it without expiry, 'add' keeps its expiry)
-- reply: {int, int}
--   {1, new capacity}, {0, capacity} when 'tryset' found one stored, or
--   {-1, capacity} when it would fall below 1 (nothing is changed). When
--   waiters are registered, those the free permits now satisfy get them in
--   arrival order (see sem_hand_on), and those wanting more than the new
--   capacity get "<owner> retry" (they fail, or keep waiting when they
--   wait for the capacity to grow).
-- #include registry
-- #include sem
local holds, counts, queue, waiters = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local mode, v, default = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local value = redis.call('get', KEYS[1]) or ''
local stored, expires, ops = string.match(value, '^(%-?%d+)(e?) ?(.*)$')
stored, ops = tonumber(stored), ops or ''
local op = ARGV[7]
if op and stored and ops_has(ops, op) then
  return {1, stored} -- this call ran already: its reply was lost
end
if mode == 'tryset' and stored then
  return {0, stored}
end
local capacity = stored or default
if mode == 'set' or mode == 'tryset' then
  capacity = v
elseif mode == 'add' then
  capacity = capacity + v
else
  capacity = default
end
if capacity < 1 then
  return {-1, capacity}
end
local cache = capacity
if mode == 'reset' then
  redis.call('del', KEYS[1])
  cache = 0
else
  local ttl = ARGV[8]
  local keep = not ttl and mode == 'add' and expires == 'e'
  local v = capacity
  if ttl or keep then
    v = v .. 'e' -- it expires: the scripts read it, not a cached copy
  end
  if op then
    v = v .. ' ' .. ops_push(ops, op)
  end
  if ttl then
    redis.call('set', KEYS[1], v, 'PX', ttl)
  elseif keep then
    redis.call('set', KEYS[1], v, 'KEEPTTL')
  else
    redis.call('set', KEYS[1], v)
  end
end
redis.call('hdel', counts, 'c') -- the scripts' cache of the key (see sem_capacity)
if redis.call('hget', counts, 'q') then
  local now = now_ms()
  local used, _, first = sem_used(holds, counts, now)
  local handoff = ARGV[6]
  local _, _, held, grants = sem_hand_on(holds, counts, queue, waiters, now, used, capacity, handoff, ARGV[4], ARGV[5], nil)
  sem_settle(holds, counts, grants, held, cache, false, not first, handoff)
  for _, m in ipairs(redis.call('lrange', queue, 0, -1)) do
    local o, d = owner_of(m)
    if tonumber(d) > capacity then
      notify(ARGV[5], ARGV[4], o, o .. ' retry')
    end
  end
end
return {1, capacity}
