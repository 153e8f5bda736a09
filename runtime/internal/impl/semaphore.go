package impl

import (
	"time"

	"github.com/lockgen/lockgen/templates"
)

// SemaphoreScripts are the scripts of semaphores (see templates/semaphores.go).
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
	set := templates.Semaphore
	return &SemaphoreScripts{
		Acquire: p.get(set.Acquire), Release: p.get(set.Release), Renew: p.get(set.Renew),
		State: p.get(set.State), Capacity: p.get(set.Capacity), Lease: p.get(set.Lease), Split: p.get(set.Split),
	}
}
