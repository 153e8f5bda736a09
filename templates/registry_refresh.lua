-- registry_refresh: keep one client's waiters of an object registered:
-- one call per client and object, however many of its waiters wait there
-- (see "Waiter registry" in docs/design.md). It moves the deadline of
-- each member still registered (one ZADD XX), keeps the registry's keys
-- alive as long, and reads the object's hold TTL, which tells the client
-- when to look again, and whether one of the members is the queue's
-- head (whose client watches the hold's end: a holder that died is found
-- by that client's refresh, the others' come every third of the TTL). It
-- changes nothing else, so a run again (a reply lost) only moves the same
-- deadlines again.
-- KEYS[1] hold: the object's key whose TTL is its holder's (an exclusive
--   lock's), or the sorted set of its holds' deadlines in server
--   milliseconds (a read-write lock's holds, a semaphore's)
-- KEYS[2] queue: the waiter registry's wait queue
-- KEYS[3] waiters: the waiter registry's deadlines
-- KEYS[4]? single: with hold_kind 'z', 's', 'R' or 'P', the key of a compact
--   single hold (a read-write lock's hash, a semaphore's counts: its field
--   "s" names the hold, its TTL is the hold's), read when hold is empty
-- ARGV[1] registry_ttl_ms: how long the registrations last from now
-- ARGV[2] hold_kind: 'k' when hold's TTL is the hold's, 'K' as 'k' and
--   the reply also names the clients to watch (see watch_of) of a hold
--   stored as a string (its value starts with the owner), 'F' the same of
--   a hold stored as a hash (a fair lock's: a field per owner), 'R' as 'z'
--   and naming the clients to watch of a read-write lock, 'P' the same of
--   a semaphore's permits, 'z' when
--   hold holds deadlines, 's' as 'z' with the compact single hold read
--   first (the client's last refresh found one: a refresh behind it is
--   then one command less, and one more when the hold changed form)
-- ARGV[3...] members: the client's members, as registered
-- reply: {int, int, int, int, string}
--   {registered, pttl, head, single, watch}: how many of the members were
--   still registered (a member gone was handed what it waited for, or
--   passed over); how long the (first) hold has left in milliseconds: -2
--   when none is left, or the first ran out unreleased; -1 when the key
--   has no TTL; 1 when the queue's head is one of the members, else 0;
--   1 when the compact single hold answered (hold_kind 'z', 's', 'R' and
--   'P'), else
--   0; and, for hold_kind 'K', 'F', 'R' and 'P', the clients whose
--   liveness vouches for the wait (watch_of), else '*'.
-- #include registry

-- holders_of returns the owners holding the object of hold_kind kind
-- ('K', 'F', 'R' or 'P', see the header), at most 65 of them (more than
-- 64 clients cannot be watched anyway), or an empty table when nothing is
-- held.
local function holders_of(kind, hold, single)
  if kind == 'K' then
    local value = redis.call('get', hold)
    return value and {(hold_of(value))} or {}
  end
  if kind == 'F' then
    for _, f in ipairs(redis.call('hkeys', hold)) do
      if f ~= 's' then
        return {f}
      end
    end
    return {}
  end
  -- A read-write lock's holds are 'w' (its owner is the hash's writer)
  -- and 'r:<owner>'; a semaphore's are owners.
  local function owner(m)
    if kind == 'P' then
      return m
    end
    if m == 'w' then
      return redis.call('hget', single, 'writer')
    end
    return string.sub(m, 3)
  end
  local compact = redis.call('hget', single, 's')
  if compact then
    return {owner(compact)}
  end
  local list = {}
  for _, m in ipairs(redis.call('zrange', hold, 0, 64)) do
    list[#list + 1] = owner(m)
  end
  return list
end

-- watch_of returns the clients whose liveness tells that the members wait
-- for nothing but a release: the holders', then those of the members
-- queued ahead of the first of these members (a release hands the object
-- on to them first), each once and other than the members' own, space
-- separated; or '*' when no such list can vouch: nothing is held, a
-- member ahead of an exclusive lock's waits for several objects (a
-- multi-lock's: a release only wakes it), none of the members is among
-- the queue's first 1024, or more than 64 clients come before them (see
-- "Waiter registry" in docs/design.md).
local function watch_of(kind, hold, single, queue, head)
  local holders = holders_of(kind, hold, single)
  if #holders == 0 then
    return '*'
  end
  local own = client_of(ARGV[3])
  local mine, seen, list = {}, {[own] = true}, {}
  for i = 3, #ARGV do
    mine[ARGV[i]] = true
  end
  -- add reports false when owner's client would be the 65th.
  local function add(owner)
    local c = client_of(owner)
    if not seen[c] then
      if #list == 64 then
        return false
      end
      seen[c] = true
      list[#list + 1] = c
    end
    return true
  end
  for _, h in ipairs(holders) do
    if not add(h) then
      return '*'
    end
  end
  if head == 1 then
    return table.concat(list, ' ')
  end
  local exclusive = kind == 'K' or kind == 'F'
  for _, m in ipairs(redis.call('lrange', queue, 0, 1023)) do
    if mine[m] then
      return table.concat(list, ' ')
    end
    local owner, detail = owner_of(m)
    if (exclusive and detail ~= '') or not add(owner) then
      return '*'
    end
  end
  return '*'
end

local queue, waiters, ttl = KEYS[2], KEYS[3], ARGV[1]
local now = now_ms()
local deadline = now + tonumber(ttl)
local args = {'XX', 'CH'}
for i = 3, #ARGV do
  args[#args + 1] = deadline
  args[#args + 1] = ARGV[i]
end
local n = redis.call('zadd', waiters, unpack(args))
local head = 0
if n > 0 then
  keep_registry(queue, waiters, ttl)
  local first = redis.call('lindex', queue, 0)
  for i = 3, #ARGV do
    if ARGV[i] == first then
      head = 1
      break
    end
  end
end
if ARGV[2] == 'k' then
  return {n, redis.call('pttl', KEYS[1]), head, 0, '*'}
end
local kind = ARGV[2]
if kind == 'K' or kind == 'F' then
  local pttl = redis.call('pttl', KEYS[1])
  local watch = '*'
  if n == #ARGV - 2 and pttl > 0 then
    watch = watch_of(kind, KEYS[1], nil, queue, head)
  end
  return {n, pttl, head, 0, watch}
end
-- 'R' and 'P' read as 'z' does, and name the clients to watch.
local watched = kind == 'R' or kind == 'P'
local single = kind == 's' and KEYS[4]
if single and redis.call('hexists', single, 's') == 1 then
  return {n, redis.call('pttl', single), head, 1, '*'}
end
local pttl, compact
local first = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
if not first[2] and KEYS[4] and not single and redis.call('hexists', KEYS[4], 's') == 1 then
  pttl, compact = redis.call('pttl', KEYS[4]), 1
elseif not first[2] or tonumber(first[2]) <= now then
  pttl, compact = -2, 0
else
  pttl, compact = tonumber(first[2]) - now, 0
end
local watch = '*'
if watched and n == #ARGV - 2 and pttl > 0 then
  watch = watch_of(kind, KEYS[1], KEYS[4], queue, head)
end
return {n, pttl, head, compact, watch}
