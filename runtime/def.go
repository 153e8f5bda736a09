package runtime

import (
	"time"

	"github.com/lockgen/lockgen/internal/keys"
)

// GeneratedCodeVersion1 is referenced by every file lockgen generates
// (`const _ = lockrt.GeneratedCodeVersion1`). It names the contract
// between generated code and this runtime; when that contract changes
// incompatibly it is renamed, so code generated for another runtime fails
// to compile with this name in the error instead of misbehaving at run time.
const GeneratedCodeVersion1 = true

// Script is a Lua script with its SHA1, as emitted by lockgen.
type Script struct {
	Name   string // file name in lockgen's templates/, without ".lua"
	Source string
	SHA1   string // hex SHA1 of Source
}

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

// The lock kinds this runtime implements.
const (
	// Reentrant locks may be taken again by their holder; each Lock needs
	// its own Unlock.
	Reentrant LockKind = iota + 1
	// Simple locks are SET NX PX with a random value and
	// compare-and-delete; taking one twice is ErrNotReentrant.
	Simple
	// Fair locks are reentrant locks whose waiters get the lock in arrival
	// order; see "Fair locks" in the package doc.
	Fair
	// ReadWrite locks have a shared read side and an exclusive write side
	// (see RWLock).
	ReadWrite
	// Fenced locks are reentrant locks whose every hold carries a fencing
	// token (see Lease.Token).
	Fenced
)

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
	// waiter registry without refreshing it (it refreshes every
	// WaiterTTL/3 while it waits, so only a dead waiter loses it); 0 means
	// RegistryTTL (DefaultWaiterTTL).
	WaiterTTL time.Duration
	// Sync, when Replicas > 0, makes every acquire wait until that many
	// replicas have the lock (see "Replica sync" in the package doc).
	Sync SyncDef
}

// SyncDef is a lock's replica sync (spec sync:): after an acquire, Redis
// WAIT for Replicas replicas, at most Timeout.
type SyncDef struct {
	Replicas int
	Timeout  time.Duration
}

// KeyDef is an object's key pattern, as emitted by lockgen.
type KeyDef struct {
	Namespace string
	Object    string
	// Literals has one more element than the object has params.
	Literals []string
}

// Key returns the key of the instance with the given param values, already
// formatted as strings, in placeholder order.
func (k *KeyDef) Key(values ...string) string {
	return keys.Build(k.Namespace, k.Object, k.Literals, values...)
}

// Version is the version of lockgen and of this runtime; they are released
// together.
const Version = "v0.1.0"
