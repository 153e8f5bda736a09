-- semaphore_state: a semaphore's capacity and the permits held, after
-- evicting the holds whose lease ran out.
-- KEYS[1] the holds, KEYS[2] the counts, KEYS[3] the capacity (see sem)
-- ARGV[1] the spec's capacity, used while KEYS[3] does not exist
-- Returns {capacity, held}.
-- #include registry
-- #include sem
local used = sem_used(KEYS[1], KEYS[2], now_ms())
return {tonumber(redis.call('get', KEYS[3])) or tonumber(ARGV[1]), used}
