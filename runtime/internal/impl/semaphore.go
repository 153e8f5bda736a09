package impl

import (
	"time"
)

// SemaphoreScripts are the scripts of semaphores. They take the holds
// zset, the counts hash, the capacity key and the waiter registry's queue
// and waiters, all in one slot (templates/sem.luainc has the state they
// share); each script's header states its KEYS, ARGV and reply.
type SemaphoreScripts struct {
	Acquire  *Script
	Release  *Script
	Renew    *Script
	State    *Script
	Capacity *Script
	Lease    *Script
	Split    *Script
}

// SemaphoreDef is the static definition of a semaphore declared in a spec.
type SemaphoreDef struct {
	Name    string // the spec's name, for errors
	Permits int    // capacity, until an operator sets another (SetPermits)
	Lease   time.Duration
	Renew   bool          // the watchdog renews held permits
	Wait    time.Duration // default wait of Acquire
	// WaiterTTL is how long a waiter keeps its place in the semaphore's
	// waiter registry without a refresh (its client refreshes it every
	// WaiterTTL/3 while it waits); 0 means the client's, as a lock's.
	WaiterTTL time.Duration
	Scripts   *SemaphoreScripts
}

// NewSemaphore makes a semaphore (runtime.Client's).
var NewSemaphore func(c any, def *SemaphoreDef, key string) any

// Semaphores returns the scripts of semaphores.
func (p *Pinned) Semaphores() *SemaphoreScripts {
	return &SemaphoreScripts{
		Acquire: p.get("semaphore_acquire"), Release: p.get("semaphore_release"), Renew: p.get("semaphore_renew"),
		State: p.get("semaphore_state"), Capacity: p.get("semaphore_capacity"), Lease: p.get("semaphore_lease"),
		Split: p.get("semaphore_split"),
	}
}
