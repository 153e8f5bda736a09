-- queue_delayed: the delayed items of a queue (its delayed zset, and their
-- bodies in data), due first first, or whether one of them holds a value
-- (compared as queue_remove compares, see queue.luainc). It only reads:
-- one consistent view, in one call.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the publish command (unused)
-- ARGV[2] n: how many items at most (0: all)
-- ARGV[3]? value: the codec's bytes of a value: the reply says whether a
--   delayed item holds it, instead of listing them
-- ARGV[4]? tag: the codec's tag (with value)
-- reply: {string...} | int
--   Without value: each item's id, due time (unix ms, server clock) and
--   body, due first first; an id whose body is missing (deleted by
--   hand: no script leaves one so) is passed over. The
--   delayed zset also holds items due already that no delay timer has
--   moved yet (their due times are past). With value: 1 when a delayed
--   item holds it, 0 when none does. Both read up to every delayed item:
--   O(N).
-- #include queue
local n = tonumber(ARGV[2])
local want, tag = ARGV[3], ARGV[4]
local out = {}
local first = 0
while n == 0 or #out < 3 * n do
  local last = first + 999
  if n > 0 and want == nil then
    last = first + n - #out / 3 - 1
  end
  local page = redis.call('zrange', KEYS[2], first, last, 'WITHSCORES')
  if #page == 0 then
    break
  end
  first = first + #page / 2
  local ids = {}
  for i = 1, #page, 2 do
    ids[#ids + 1] = page[i]
  end
  local bodies = redis.call('hmget', KEYS[3], unpack(ids))
  for i, id in ipairs(ids) do
    local body = bodies[i]
    if want ~= nil then
      if queue_holds(body, want, tag) then
        return 1
      end
    elseif body then
      out[#out + 1] = id
      out[#out + 1] = page[2 * i]
      out[#out + 1] = body
    end
  end
end
if want ~= nil then
  return 0
end
return out
