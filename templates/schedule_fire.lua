-- schedule_fire: claim one tick of a schedule for this caller, once
-- across every replica, by the server clock; for a schedule that targets a
-- queue, offer the tick's item in the same step, so that a crash between
-- the claim and the offer cannot lose it.
-- KEYS[1] state: the schedule's hash: cursor (the newest tick handled,
--   fired or skipped while paused, unix ms), fired (the newest tick
--   fired), by (the id of the client that fired it), at (the server time
--   it fired, unix ms), op (its operation id), fires (how many fired),
--   paused ('1' while paused)
-- KEYS[2]? ready: the target queue's ready list (its key)
-- KEYS[3]? data: the target queue's data hash (id -> body)
-- KEYS[4]? takers: the target queue's waiting consumers
-- ARGV[1] tick_ms: the tick to claim (unix ms), or '' to read the state
-- ARGV[2]? by: the caller's client id
-- ARGV[3]? op: the claim's operation id, unique across clients (for a
--   reliable queue also the item's id): a claim that finds it recorded
--   for its tick ran already (its reply was lost) and answers 1 again
-- ARGV[4]? next_ms: the tick after tick_ms: while the state has no
--   cursor (a schedule never fired, or its state was lost with an empty
--   Redis restart), a tick whose next one is due already is handled, not
--   fired, so that a replica that knew an older cursor cannot fire again
--   what was fired before the state was lost
-- ARGV[5]? deadline_ms: the tick is missed once the server clock is at
--   or past it (catchUp none), or ''
-- ARGV[6]? publish: the publish command (publish or spublish), which
--   wakes the queue's waiting consumers
-- ARGV[7]? mode: the queue's mode, 'r' reliable (the ready list holds
--   ids, bodies live in data) or 'p' plain (it holds bodies)
-- ARGV[8]? item: the encoded item
-- reply: {int, int, int, int, string}
--   status, cursor, now, fired, by: status 1 when this call fired the
--   tick (and offered its item), 0 when the tick was handled already
--   (cursor >= tick: another replica fired it or a later one; or the
--   state has no cursor and the tick is not the newest due), -1 when
--   the tick is not due yet by the server clock, -2 when the schedule is
--   paused (the tick is skipped: cursor moves to it, nothing fires), -3
--   when the tick was missed (deadline passed; nothing changes), 2 for a
--   read; cursor and fired are 0 when none, now is the server time (unix
--   ms), by '' when nothing fired.
-- #include queue
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('hmget', KEYS[1], 'cursor', 'fired', 'by', 'op', 'paused')
local cursor, fired, by = tonumber(s[1]) or 0, tonumber(s[2]) or 0, s[3] or ''
if ARGV[1] == '' then
  return {2, cursor, now, fired, by}
end
local tick = tonumber(ARGV[1])
if fired == tick and s[4] == ARGV[3] then
  return {1, cursor, now, fired, by}
end
if now < tick then
  return {-1, cursor, now, fired, by}
end
if cursor >= tick or not s[1] and tonumber(ARGV[4]) <= now then
  return {0, cursor, now, fired, by}
end
if s[5] == '1' then
  redis.call('hset', KEYS[1], 'cursor', ARGV[1])
  return {-2, tick, now, fired, by}
end
if ARGV[5] ~= '' and now >= tonumber(ARGV[5]) then
  return {-3, cursor, now, fired, by}
end
redis.call('hset', KEYS[1], 'cursor', ARGV[1], 'fired', ARGV[1], 'by', ARGV[2], 'at', now, 'op', ARGV[3])
redis.call('hincrby', KEYS[1], 'fires', 1)
if KEYS[2] then
  local item = ARGV[8]
  if ARGV[7] == 'r' then
    redis.call('hset', KEYS[3], ARGV[3], item)
    item = ARGV[3]
  end
  redis.call('rpush', KEYS[2], item)
  queue_wake(KEYS[2], KEYS[4], ARGV[6], 1, now)
end
return {1, tick, now, tick, ARGV[2]}
