-- multi_release: give up one hold of each of several reentrant or simple
-- locks of one owner, in one step (the locks multi_acquire took).
-- KEYS the lock keys, each once
-- ARGV[1] owner id; then, for the i-th key, ARGV[3i-1] its kind
-- ('reentrant' or 'simple'), ARGV[3i] its lease in milliseconds and
-- ARGV[3i+1] its wake-up channel
-- Returns one code per key, as the kind's release script does: -1 not
-- held by the owner, n > 0 holds left (the lease is restarted), 0 released
-- (the key is deleted and the channel told).
local owner = ARGV[1]
local codes = {}

for i, lock in ipairs(KEYS) do
  local kind, lease, channel = ARGV[3 * i - 1], tonumber(ARGV[3 * i]), ARGV[3 * i + 1]
  local code = -1
  if kind == 'simple' then
    if redis.call('get', lock) == owner then
      redis.call('del', lock)
      code = 0
    end
  else
    local value = redis.call('get', lock)
    local holder, holds = string.match(value or '', '^(%S+) (%d+)$')
    if holder == owner then
      code = tonumber(holds) - 1
      if code > 0 then
        redis.call('set', lock, owner .. ' ' .. code, 'PX', lease)
      else
        redis.call('del', lock)
      end
    end
  end
  if code == 0 then
    redis.call('publish', channel, 'released')
  end
  codes[i] = code
end
return codes
