package templates

// Calling convention of the semaphore scripts (KEYS: the holds zset, the
// counts hash, the capacity key, then the waiter registry's queue and
// waiters, all in one slot; see sem.luainc):
//
//	semaphore_acquire(holds, counts, capacity, queue, waiters; ARGV: owner, n or '*' (drain), lease ms, spec capacity, registry TTL ms, '1' if registered, channel prefix, publish command, hand-off lease ms, '1' to wait for capacity) -> {1, free, n} | {0, free, ms to earliest expiry or -1} | {-1, capacity}
//	semaphore_release(holds, counts, capacity, queue, waiters; ARGV: owner, channel prefix, publish command, spec capacity, hand-off lease ms, permits waited for when leaving or '0') -> permits given back | -1 not held
//	semaphore_renew(holds, counts; ARGV: lease ms, owner) -> 1 renewed | 0 not held
//	semaphore_state(holds, counts, capacity; ARGV: spec capacity) -> {capacity, held}
//	semaphore_capacity(capacity, holds, counts, queue, waiters; ARGV: set|tryset|add|reset, value, spec capacity, channel prefix, publish command, hand-off lease ms) -> {1, capacity} | {0, capacity stored} | {-1, capacity}
//
// and of the latch script (KEYS[1]: the count):
//
//	latch_count_down(count; ARGV: spec count, expire ms, channel, publish command) -> count left

// SemaphoreSet names the scripts of semaphores.
type SemaphoreSet struct {
	Acquire, Release, Renew, State, Capacity string
}

// Names returns the set's script names in a fixed order.
func (s SemaphoreSet) Names() []string {
	return []string{s.Acquire, s.Release, s.Renew, s.State, s.Capacity}
}

// Semaphore names the scripts of semaphores.
var Semaphore = SemaphoreSet{
	Acquire:  "semaphore_acquire",
	Release:  "semaphore_release",
	Renew:    "semaphore_renew",
	State:    "semaphore_state",
	Capacity: "semaphore_capacity",
}

// LatchSet names the scripts of count-down latches.
type LatchSet struct {
	CountDown string
}

// Names returns the set's script names in a fixed order.
func (s LatchSet) Names() []string { return []string{s.CountDown} }

// Latch names the scripts of count-down latches.
var Latch = LatchSet{CountDown: "latch_count_down"}
