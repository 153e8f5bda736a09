package templates

// Calling convention of the semaphore scripts (KEYS: the holds zset, the
// counts hash, the capacity key, all in one slot):
//
//	semaphore_acquire(holds, counts, capacity; ARGV: owner, n, lease ms, spec capacity) -> {1, free} | {0, free, ms to earliest expiry or -1} | {-1, capacity}
//	semaphore_release(holds, counts; ARGV: owner, channel) -> permits given back | -1 not held
//	semaphore_renew(holds, counts; ARGV: lease ms, owner) -> 1 renewed | 0 not held
//	semaphore_state(holds, counts, capacity; ARGV: spec capacity) -> {capacity, held}
//	semaphore_capacity(capacity; ARGV: set|add|reset, value, spec capacity, channel) -> {1, capacity} | {-1, capacity}
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
