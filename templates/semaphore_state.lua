-- semaphore_state: a semaphore's capacity and the permits held, after
-- evicting the holds whose lease ran out.
-- KEYS[1] holds: the holds (a zset: owner -> expiry in server ms)
-- KEYS[2] counts: the counts (a hash: owner -> its permits, '*' -> permits
--   held in all, 'q' -> 1 while waiters may be registered)
-- KEYS[3] capacity: the capacity, when an operator set one
-- ARGV[1] spec_capacity: the spec's capacity, used while KEYS[3] does not
--   exist
-- reply: {int, int}
--   {capacity, held}.
-- #include registry
-- #include sem
local used = sem_used(KEYS[1], KEYS[2], now_ms())
local capacity = sem_capacity(KEYS[3], nil, ARGV[1])
return {capacity, used}
