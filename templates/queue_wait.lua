-- queue_wait: a consumer that found nothing to take waits for a queue's
-- items: it registers (or refreshes its registration) in takers, unless
-- items are ready; or it leaves, passing on a wake-up it did not use.
-- KEYS[1..11] ready, delayed, data, seq, armed, proc, inflight, att, dead, err, takers:
--   the queue's keys, the same for every queue script (lockgen's queue
--   layout: ready is the queue's key, the others its sub-keys)
-- ARGV[1] publish: the command that publishes wake-ups (publish or
--   spublish)
-- ARGV[2] owner: the waiting consumer, "<clientID>:<n>"
-- ARGV[3] leave: '' to register or refresh, '1' to leave, 'r' to
--   refresh the entries of owner and more (a client's refresh of its
--   consumers waiting on the queue, one call for all of them)
-- ARGV[4...] more: with 'r', more waiting consumers
-- reply: int
--   Registering: 0 when items are ready (the consumer is not registered,
--   and takes now), else how long its entry lives (ms). Refreshing: 0
--   when items are ready, else 1 plus the number of the consumers whose
--   entry was not there (it is not added back).
--   Leaving: 1 when the consumer had been woken (its entry was taken out)
--   and items are ready, so that its wake-up went on to the next
--   consumer, else 0.
--   Running it twice changes nothing more (ZADD and ZREM of one member).
--   A paused queue (KEYS[1]..':paused' is there, see queue_pause) counts
--   as one without ready items.
-- #include queue
if ARGV[3] == '1' then
  if redis.call('zrem', KEYS[11], ARGV[2]) == 1 or redis.call('llen', KEYS[1]) == 0
    or redis.call('exists', KEYS[1] .. ':paused') == 1 then
    return 0
  end
  queue_wake(KEYS[1], KEYS[11], ARGV[1], 1, nil)
  return 1
end
if ARGV[3] == 'r' then
  -- Entries that are gone (a consumer woken, or data lost) are not
  -- added back: the caller wakes its consumers, which register again.
  if redis.call('llen', KEYS[1]) > 0 and redis.call('exists', KEYS[1] .. ':paused') == 0 then
    return 0
  end
  local deadline = queue_now_ms() + taker_ttl
  local zargs = {deadline, ARGV[2]}
  for i = 4, #ARGV do
    zargs[#zargs + 1] = deadline
    zargs[#zargs + 1] = ARGV[i]
  end
  local n = redis.call('zadd', KEYS[11], 'XX', 'CH', unpack(zargs))
  redis.call('pexpire', KEYS[11], taker_ttl)
  return 1 + (#zargs / 2 - n)
end
if redis.call('llen', KEYS[1]) > 0 and redis.call('exists', KEYS[1] .. ':paused') == 0 then
  redis.call('zrem', KEYS[11], ARGV[2])
  return 0
end
queue_register(KEYS[11], ARGV[2], nil)
return taker_ttl
