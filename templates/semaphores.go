package templates

// The semaphore scripts take the holds zset, the counts hash, the
// capacity key and the waiter registry's queue and waiters, all in one
// slot (sem.luainc has the state they share); each script's header
// states its KEYS, ARGV and reply.

// SemaphoreSet names the scripts of semaphores.
type SemaphoreSet struct {
	Acquire, Release, Renew, State, Capacity, Lease, Split string
}

// Names returns the set's script names in a fixed order.
func (s SemaphoreSet) Names() []string {
	return []string{s.Acquire, s.Release, s.Renew, s.State, s.Capacity, s.Lease, s.Split}
}

// Semaphore names the scripts of semaphores.
var Semaphore = SemaphoreSet{
	Acquire:  "semaphore_acquire",
	Release:  "semaphore_release",
	Renew:    "semaphore_renew",
	State:    "semaphore_state",
	Capacity: "semaphore_capacity",
	Lease:    "semaphore_lease",
	Split:    "semaphore_split",
}
