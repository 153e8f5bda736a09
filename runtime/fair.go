package runtime

import (
	"time"
)

// DefaultWaiterTTL is how long a waiter of a fair lock keeps its place in
// the queue without refreshing it, unless its LockDef says otherwise: the
// waiter registry's RegistryTTL. A live waiter refreshes it every third
// of it; a waiter that died is passed over at most this long after its
// last refresh (or, when a release handed it the lock meanwhile, once the
// hand-off's lease, HandoffLease, as long, runs out).
const DefaultWaiterTTL = RegistryTTL

// A fair lock is a reentrant Lock whose waiters get it in arrival order.
// Its scripts keep, next to the lock hash, the waiter registry (see
// "Waiter registry" in docs/design.md): the wait queue (":queue", a list
// of owners) and each waiter's deadline (":waiters", a zset scored by the
// Redis server's clock). A waiter registers in its failed attempt,
// refreshes its deadline every WaiterTTL/3 while it waits, and sleeps on
// its client's channel; a release hands the lock to the first live waiter
// and tells it so, and a newcomer never takes a free lock past a live
// waiter. Scripts of the lock drop the waiters whose deadline passed; a
// waiter that gives up leaves the queue at once (best effort: otherwise
// it is dropped at its deadline).

// registryTTL is how long a registered waiter of l keeps its place
// unrefreshed: LockDef's WaiterTTL, or RegistryTTL.
func (l *Lock) registryTTL() time.Duration {
	if l.def.WaiterTTL > 0 {
		return l.def.WaiterTTL
	}
	return RegistryTTL
}
