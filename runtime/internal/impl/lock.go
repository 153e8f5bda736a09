package impl

import (
	"time"
)

// LockScripts are the scripts that implement one lock kind. Every kind
// follows the same calling convention (see templates/README.md).
type LockScripts struct {
	Acquire     *Script
	Release     *Script
	Renew       *Script
	ForceUnlock *Script
	// MultiAcquire and MultiRelease take and give up several locks of the
	// kinds that have them (reentrant, simple) in one script, when a
	// MultiLock's keys are on one slot; nil for the other kinds.
	MultiAcquire *Script
	MultiRelease *Script
}

// LockKind is the kind of a lock.
type LockKind int

func (k LockKind) String() string {
	switch k {
	case Reentrant:
		return "reentrant"
	case Simple:
		return "simple"
	case Fair:
		return "fair"
	case ReadWrite:
		return "readwrite"
	case Fenced:
		return "fenced"
	}
	return "unknown"
}

// LockDef is the static definition of a lock declared in a spec.
type LockDef struct {
	Name    string   // the spec's name, for errors
	Kind    LockKind // Reentrant, Simple, Fair, ReadWrite or Fenced
	Lease   time.Duration
	Renew   bool          // the watchdog renews the lease while held
	Wait    time.Duration // default wait of Lock
	Scripts *LockScripts
	// WaiterTTL is how long a registered waiter keeps its place in the
	// waiter registry without a refresh (its client refreshes it every
	// WaiterTTL/3 while it waits, so only a stopped waiter loses it); 0
	// means the client's: LiveRegistryTTL where a release can tell a
	// waiter whose client went away, else RegistryTTL.
	WaiterTTL time.Duration
	// Sync, when Replicas > 0, makes every acquire wait until that many
	// replicas have the lock (see "Replica sync" in docs/design.md).
	Sync SyncDef
}

// SyncDef is a lock's replica sync (spec sync:): after an acquire, Redis
// WAIT for Replicas replicas, at most Timeout.
type SyncDef struct {
	Replicas int
	Timeout  time.Duration
}

// RedLockDef is the static definition of a redlock lock declared in a
// spec. Its scripts are a simple lock's (SET NX PX, compare-and-delete,
// compare-and-pexpire), run on every node.
type RedLockDef struct {
	Name  string // the spec's name, for errors
	Lease time.Duration
	Renew bool          // renewed on a majority while held
	Wait  time.Duration // default wait of Lock
	// WaiterTTL is how long a waiter keeps its place in each node's
	// waiter registry without a refresh (its node clients refresh it
	// every WaiterTTL/3 while it waits); 0 means LiveRegistryTTL where every node's release
	// can tell a waiter whose client went away, else RegistryTTL.
	WaiterTTL time.Duration
	Scripts   *LockScripts
}

// NewLock makes a lock (runtime.Client's).
var NewLock func(c any, def *LockDef, key string) any

// NewRWLock makes a read-write lock (runtime.Client's).
var NewRWLock func(c any, def *LockDef, key string) any

// NewRedLock makes a RedLock (runtime.Quorum's).
var NewRedLock func(q any, def *RedLockDef, key string) any

// lockNames names the scripts of one lock kind (see LockScripts).
type lockNames struct {
	acquire, release, renew, forceUnlock string
	// multiAcquire and multiRelease: the kinds that have them.
	multiAcquire, multiRelease string
}

// lockSets are the scripts of each lock kind: the hold kinds share
// release, renew and force_unlock where their holds are alike.
var lockSets = map[LockKind]lockNames{
	Reentrant: {"reentrant_acquire", "reentrant_release", "reentrant_renew", "force_unlock", "multi_acquire", "multi_release"},
	Simple:    {"simple_acquire", "simple_release", "simple_renew", "force_unlock", "multi_acquire", "multi_release"},
	Fair:      {"fair_acquire", "fair_release", "fair_renew", "fair_force_unlock", "", ""},
	ReadWrite: {"rw_acquire", "rw_release", "rw_renew", "rw_force_unlock", "", ""},
	Fenced:    {"fenced_acquire", "reentrant_release", "reentrant_renew", "force_unlock", "", ""},
}

// redLockSet: a RedLock runs its own acquire and release and a simple
// lock's renew on every node of its quorum, each node with its own
// waiter registry.
var redLockSet = lockNames{"redlock_acquire", "redlock_release", "simple_renew", "force_unlock", "", ""}

// Locks returns the scripts of a lock kind.
func (p *Pinned) Locks(kind LockKind) *LockScripts { return p.lockSet(lockSets[kind]) }

// RedLocks returns the scripts of RedLocks.
func (p *Pinned) RedLocks() *LockScripts { return p.lockSet(redLockSet) }

func (p *Pinned) lockSet(set lockNames) *LockScripts {
	return &LockScripts{
		Acquire: p.get(set.acquire), Release: p.get(set.release), Renew: p.get(set.renew),
		ForceUnlock: p.get(set.forceUnlock), MultiAcquire: p.get(set.multiAcquire), MultiRelease: p.get(set.multiRelease),
	}
}

// The lock kinds this runtime implements.
const (
	// Reentrant locks may be taken again by their holder; each Lock needs
	// its own Unlock.
	Reentrant LockKind = iota + 1
	// Simple locks are SET NX PX with a random value and
	// compare-and-delete; taking one twice is ErrNotReentrant.
	Simple
	// Fair locks are reentrant locks whose waiters get the lock in arrival
	// order; see "Fair locks" in docs/design.md.
	Fair
	// ReadWrite locks have a shared read side and an exclusive write side
	// (see RWLock).
	ReadWrite
	// Fenced locks are reentrant locks whose every hold carries a fencing
	// token (see Lease.Token).
	Fenced
)
