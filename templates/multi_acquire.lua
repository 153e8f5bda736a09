-- multi_acquire: take several reentrant or simple locks for one owner, all
-- or none, in one step. Used when every key is on one slot (or one node).
-- KEYS[1...] locks: three per lock, each lock once: KEYS[3i-2] the i-th
--   lock (a reentrant lock is "<owner> <holds>[ w]", a simple one
--   "<owner>[ w]", as in their acquire scripts), KEYS[3i-1] and KEYS[3i]
--   its waiter registry (queue, waiters)
-- ARGV[1] owner: the owner id
-- ARGV[2] registry_ttl_ms: how long a registration lasts (0: do not
--   register)
-- ARGV[3] registered: '1' when the owner is registered already, '2:<i>'
--   when it is registered at lock i (the one that blocked it) and only
--   refreshes that entry while lock i is held (see refresh in registry;
--   the full attempt otherwise), else '0'; prefixed with 'n' for a new
--   owner (made for this call): finding a lock held by itself, it ran
--   already and answers {1, n}
-- ARGV[4...] per_lock: two per lock: ARGV[2i+2] the i-th lock's kind
--   ('reentrant' or 'simple') and ARGV[2i+3] its lease in milliseconds
-- reply: {int, int} | {int, int, int}
--   {1, n} when every lock was taken or re-entered; {0, pttl, i} when lock
--   i (1-based) is held by another owner (the owner is then registered as
--   "<owner> m" in lock i's registry, to be woken, not handed the lock, by
--   its release; its entries at the other locks go); {-1, pttl, i} when
--   simple lock i is already held by this owner. No lock is written unless
--   all are taken.
-- #include registry
local owner, ttl = ARGV[1], ARGV[2]
local fresh, flag = string.match(ARGV[3], '^(n?)(.*)$')
fresh = fresh == 'n'
local waiting, at = flag == '1', tonumber(string.match(flag, '^2:(%d+)$'))
local member = owner .. ' m'
local n = #KEYS / 3

if at then
  waiting = true
  if at >= 1 and at <= n then
    local pttl = refresh(KEYS[3 * at - 2], KEYS[3 * at - 1], KEYS[3 * at], member, ttl)
    if pttl then
      return {0, pttl, at}
    end
  end
end

for i = 1, n do
  local lock = KEYS[3 * i - 2]
  local value = redis.call('get', lock)
  local holder = value and string.match(value, '^%S+')
  if fresh and holder == owner then
    -- A new owner that holds a lock already: an earlier run of this call
    -- took them all (a run takes all or none) and its reply was lost.
    for j = 1, n do
      redis.call('pexpire', KEYS[3 * j - 2], ARGV[2 * j + 3])
    end
    return {1, n}
  end
  if holder and (holder ~= owner or ARGV[2 * i + 2] == 'simple') then
    if holder == owner then
      return {-1, redis.call('pttl', lock), i}
    end
    if ttl ~= '0' then
      for j = 1, n do
        if j ~= i then
          unregister(KEYS[3 * j - 1], KEYS[3 * j], member)
        end
      end
      register(KEYS[3 * i - 1], KEYS[3 * i], member, ttl, now_ms())
      if string.sub(value, -2) ~= ' w' then
        redis.call('set', lock, value .. ' w', 'KEEPTTL')
      end
    end
    return {0, redis.call('pttl', lock), i}
  end
end

for i = 1, n do
  local lock, queue = KEYS[3 * i - 2], KEYS[3 * i - 1]
  local lease = ARGV[2 * i + 3]
  if waiting then
    unregister(queue, KEYS[3 * i], member)
  end
  local value = redis.call('get', lock)
  local v = owner
  if ARGV[2 * i + 2] ~= 'simple' then
    local holds, rest = 1, ''
    if value then
      local _, h, r = hold_of(value)
      holds, rest = h + 1, r
    end
    v = owner .. ' ' .. holds .. rest
  end
  if not value and redis.call('exists', queue) == 1 then
    v = v .. ' w'
  end
  redis.call('set', lock, v, 'PX', lease)
end
return {1, n}
