-- latch_count_down: count a latch down by one, once per operation; the
-- last count-down opens it and wakes every waiter.
-- KEYS[1] count: the latch's count, "<count>[ <op>[,<op>...]]": the
--   operations of its last count-downs follow the count (at most 16,
--   newest first); an open latch is "0"
-- ARGV[1] spec_count: the spec's count, used while the latch is not set
-- ARGV[2] expire_ms: expiry in milliseconds of a latch set here
-- ARGV[3] channel: the wake-up channel
-- ARGV[4] publish: the publish command (publish or spublish)
-- ARGV[5]? op: the count-down's operation id: a call that finds it
--   recorded ran already (its reply was lost) and answers the count left
-- reply: int
--   The count left. An open latch (0) stays open until it expires.
local value = redis.call('get', KEYS[1])
local count, ops = tonumber(ARGV[1]), ''
if value then
  local c, rest = string.match(value, '^(%-?%d+) ?(.*)$')
  count, ops = tonumber(c), rest
end
if count <= 0 then
  return 0
end
local op = ARGV[5]
if op and ops ~= '' and string.find(',' .. ops .. ',', ',' .. op .. ',', 1, true) then
  return count
end
count = count - 1
local v = count
if count > 0 and op then
  local list, n = op, 1
  for o in string.gmatch(ops, '[^,]+') do
    if n == 16 then
      break
    end
    list, n = list .. ',' .. o, n + 1
  end
  v = count .. ' ' .. list
end
if value then
  redis.call('set', KEYS[1], v, 'KEEPTTL')
else
  redis.call('set', KEYS[1], v, 'PX', ARGV[2])
end
if count == 0 then
  redis.call(ARGV[4], ARGV[3], 'all')
end
return count
