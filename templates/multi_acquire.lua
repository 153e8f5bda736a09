-- multi_acquire: take several reentrant or simple locks for one owner, all
-- or none, in one step. Used when every key is on one slot (or one node).
-- KEYS the lock keys, each once (a reentrant lock is "<owner> <holds>",
-- as in reentrant_acquire)
-- ARGV[1] owner id; then, for the i-th key, ARGV[2i] its kind
-- ('reentrant' or 'simple') and ARGV[2i+1] its lease in milliseconds
-- Returns {1, n} when every lock was taken or re-entered; {0, pttl, i}
-- when lock i (1-based) is held by another owner, and {-1, pttl, i} when
-- simple lock i is already held by this owner. Nothing is written unless
-- all are taken.
local owner = ARGV[1]

for i, lock in ipairs(KEYS) do
  if ARGV[2 * i] == 'simple' then
    local holder = redis.call('get', lock)
    if holder == owner then
      return {-1, redis.call('pttl', lock), i}
    elseif holder then
      return {0, redis.call('pttl', lock), i}
    end
  else
    local value = redis.call('get', lock)
    if value and string.match(value, '^(%S+) ') ~= owner then
      return {0, redis.call('pttl', lock), i}
    end
  end
end

for i, lock in ipairs(KEYS) do
  local lease = tonumber(ARGV[2 * i + 1])
  if ARGV[2 * i] == 'simple' then
    redis.call('set', lock, owner, 'PX', lease)
  else
    local holds = 1
    local value = redis.call('get', lock)
    if value then
      holds = tonumber(string.match(value, '^%S+ (%d+)')) + 1
    end
    redis.call('set', lock, owner .. ' ' .. holds, 'PX', lease)
  end
end
return {1, #KEYS}
