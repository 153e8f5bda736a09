package runtime

import (
	"time"

	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

// DefaultWaiterTTL is how long a waiter of a fair lock keeps its place in
// the queue without a refresh, unless its LockDef says otherwise, where a
// release can tell a waiter whose client went away (it passes such a
// waiter over at once; see LiveRegistryTTL): its client refreshes it
// every third of it; a waiter whose client stopped is passed over at
// most this long after the last refresh (or, when a release handed it
// the lock meanwhile, once the hand-off's lease, HandoffLease, runs
// out). Elsewhere the default is RegistryTTL.
const DefaultWaiterTTL = LiveRegistryTTL

// A fair lock is a reentrant Lock whose waiters get it in arrival order.
// Its scripts keep, next to the lock hash, the waiter registry (see
// "Waiter registry" in docs/design.md): the wait queue (":queue", a list
// of owners) and each waiter's deadline (":waiters", a zset scored by the
// Redis server's clock). A waiter registers in its failed attempt,
// its client refreshes its deadline every WaiterTTL/3 while it waits, and it sleeps on
// its client's channel; a release hands the lock to the first live waiter
// and tells it so, and a newcomer never takes a free lock past a live
// waiter. Scripts of the lock drop the waiters whose deadline passed; a
// waiter that gives up leaves the queue at once (best effort: otherwise
// it is dropped at its deadline).

// registryTTL is how long a registered waiter of l keeps its place
// unrefreshed as its calls are prepared (the usual wait's, waitTTL):
// LockDef's WaiterTTL, or LiveRegistryTTL.
func (l *Lock) registryTTL() time.Duration {
	if l.def.WaiterTTL > 0 {
		return l.def.WaiterTTL
	}
	return LiveRegistryTTL
}

// waitTTL is how long a registered waiter of l keeps its place
// unrefreshed: LockDef's WaiterTTL, or the client's (LiveRegistryTTL
// where a release can tell a gone waiter, else RegistryTTL).
func (l *Lock) waitTTL() time.Duration {
	if l.def.WaiterTTL > 0 {
		return l.def.WaiterTTL
	}
	return l.c.waitRegistryTTL()
}

// registration is a waiter's entry as owner in l's registry, whose hold
// had pttl left at its last attempt.
func (l *Lock) registration(owner string, ttl, pttl time.Duration) *registration {
	k := l.ops.Keys()
	r := &registration{reg: rdb.Registry{Hold: k[0], Queue: k[1], Waiters: k[2]}, ttl: ttl, member: owner, pttl: pttl,
		short: l.def.Lease <= 2*HandoffLease}
	r.fixed = !l.def.Renew
	r.reg.Watch = "K"
	if l.def.Kind == impl.Fair {
		r.reg.Watch = "F"
	}
	if l.mode != "" { // a read-write lock: KEYS lock, holds, queue, waiters
		r.reg.Hold, r.reg.Queue, r.reg.Waiters, r.reg.Deadlines, r.reg.Single = k[1], k[2], k[3], true, k[0]
		r.reg.Watch = "R"
		r.member = owner + " " + l.mode
	}
	return r
}
