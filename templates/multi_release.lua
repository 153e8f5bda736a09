-- multi_release: give up one hold of each of several reentrant or simple
-- locks of one owner, in one step (the locks multi_acquire took); a lock
-- released with waiters registered is handed on as its own release
-- script would.
-- KEYS[1...] locks: three per lock, as in multi_acquire (lock, queue,
--   waiters)
-- ARGV[1] owner: the owner id
-- ARGV[2] publish: the publish command (publish or spublish)
-- ARGV[3...] per_lock: four per lock: ARGV[4i-1] the i-th lock's kind
--   ('reentrant' or 'simple'), ARGV[4i] its lease in milliseconds,
--   ARGV[4i+1] its wake-up channel prefix and ARGV[4i+2] its hand-off
--   lease in milliseconds
-- reply: {int...}
--   One code per lock, as the kind's release script replies: -1 not held
--   by the owner, n > 0 holds left (the lease is restarted), 0 released.
-- #include registry
local owner, publish = ARGV[1], ARGV[2]
local codes = {}

for i = 1, #KEYS / 3 do
  local lock, queue, waiters = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local kind, lease = ARGV[4 * i - 1], ARGV[4 * i]
  local value = redis.call('get', lock) or ''
  local code, waited = -1, string.sub(value, -2) == ' w'
  if kind == 'simple' then
    if value == owner or value == owner .. ' w' then
      code = 0
    end
  else
    local holder, holds, rest = hold_of(value)
    if holder == owner then
      code = holds - 1
      if code > 0 then
        redis.call('set', lock, owner .. ' ' .. code .. rest, 'PX', lease)
      end
    end
  end
  if code == 0 then
    if waited then
      hand_on(lock, queue, waiters, nil, kind ~= 'simple', ARGV[4 * i + 2], ARGV[4 * i + 1], publish)
    else
      redis.call('del', lock)
    end
  end
  codes[i] = code
end
return codes
