// Package impl holds what generated code gives the runtime: the static
// definitions of the objects of a spec, their scripts, and the hooks
// through which package lockimpl reaches the runtime's constructors
// without the runtime exporting them. Generated code names these types
// through lockimpl's aliases; the runtime uses them directly.
package impl

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
)

// Script is one of the runtime's Lua scripts with its SHA1 (see Pin).
type Script struct {
	Name   string // file name in lockgen's templates/, without ".lua"
	Source string
	SHA1   string // hex SHA1 of Source
	// Err, when not nil, is returned by every call that would run the
	// script: the generated code that pinned it was made for another
	// runtime's scripts (ErrScriptMismatch).
	Err error
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

// RegistryTTL and HandoffLease are the waiter registry's timings (the
// runtime's RegistryTTL and HandoffLease document them); the scripts'
// registry_ttl is RegistryTTL.
const (
	RegistryTTL  = time.Second
	HandoffLease = RegistryTTL
)

// OfferRecordTTL is how long a queue operation's record lives (the
// runtime's OfferRecordTTL documents it).
const OfferRecordTTL = time.Minute

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
	// order; see "Fair locks" in docs/design.md.
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
	// replicas have the lock (see "Replica sync" in docs/design.md).
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

// LatchScripts are the scripts of count-down latches (see
// templates/semaphores.go).
type LatchScripts struct {
	CountDown *Script
}

// LatchDef is the static definition of a count-down latch declared in a
// spec.
type LatchDef struct {
	Name    string        // the spec's name, for errors
	Count   int           // the count of a latch nobody set with TrySetCount
	Expire  time.Duration // how long a latch's key lives after it was set
	Scripts *LatchScripts
}

// LimiterAlgorithm is how a limiter decides.
type LimiterAlgorithm int

// The limiter algorithms. GCRA and TokenBucket allow the same traffic for
// the same definition: Burst+1 requests at once, then Rate per Per, spread
// evenly; they differ in what Redis holds. SlidingWindow allows at most
// Rate requests in any window of length Per.
const (
	// GCRA is the generic cell rate algorithm: the state is one number,
	// the theoretical arrival time of the next request.
	GCRA LimiterAlgorithm = iota + 1
	// TokenBucket holds Burst+1 tokens, refilled continuously at Rate per
	// Per; the state is a hash of the tokens and when they were counted.
	TokenBucket
	// SlidingWindow keeps an exact log of the requests allowed in the last
	// Per (a sorted set), so it never allows more than Rate in any window
	// of that length. Its cost grows with Rate.
	SlidingWindow
)

func (a LimiterAlgorithm) String() string {
	switch a {
	case GCRA:
		return "gcra"
	case TokenBucket:
		return "token-bucket"
	case SlidingWindow:
		return "sliding-window"
	}
	return "unknown"
}

// LimiterScope says who shares a limiter's allowance.
type LimiterScope int

// The limiter scopes.
const (
	// ScopeOverall: one allowance shared by every client.
	ScopeOverall LimiterScope = iota + 1
	// ScopePerClient: every runtime Client (see WithID) has an allowance
	// of its own.
	ScopePerClient
)

func (s LimiterScope) String() string {
	switch s {
	case ScopeOverall:
		return "overall"
	case ScopePerClient:
		return "per-client"
	}
	return "unknown"
}

// LimiterScripts are the scripts of one limiter algorithm (see
// templates/limiters.go).
type LimiterScripts struct {
	Allow     *Script
	Configure *Script
}

// LimiterDef is the static definition of a limiter declared in a spec.
type LimiterDef struct {
	Name      string // the spec's name, for errors
	Algorithm LimiterAlgorithm
	Rate      int           // requests allowed per Per; at least 1
	Per       time.Duration // at least a microsecond
	Burst     int           // requests allowed at once above the rate (GCRA, TokenBucket)
	Scope     LimiterScope
	// IdleTTL bounds how long the limiter's keys outlive the last request
	// counted: after IdleTTL without one, the state and config expire and
	// the limiter is full again, even if it would not have refilled by
	// then (a limit of 1000 per day with an IdleTTL of 1h forgets a user
	// after an idle hour). 0, the default: the state expires when the
	// limiter is full again (Per*(Burst+1)/Rate after the last request,
	// Per for SlidingWindow) and the config a second after that. An
	// IdleTTL longer than that changes nothing.
	IdleTTL time.Duration
	Scripts *LimiterScripts
}

// Capacity returns the most requests the limiter allows at once: Burst+1
// for GCRA and TokenBucket, Rate for SlidingWindow.
func (d *LimiterDef) Capacity() int {
	if d.Algorithm == SlidingWindow {
		return d.Rate
	}
	return d.Burst + 1
}

// QueueScripts are the scripts of queues (see lockgen's templates/queues.go
// for their calling convention). Every queue uses the same set.
type QueueScripts struct {
	Offer, Move, Take, Ack, Nack, Extend, Bury, Dead, Redrive *Script
	Peek, Remove, Drain                                       *Script
}

// QueueDef is the static definition of a queue declared in a spec.
type QueueDef struct {
	Name          string        // the spec's name, for errors
	Delay         bool          // items may be offered with a delay
	Reliable      bool          // deliveries are acknowledged
	Visibility    time.Duration // reliable: how long a delivery stays hidden before it is redelivered
	MaxDeliveries int           // reliable: deliveries before an item is dead-lettered
	Dedupe        time.Duration // reliable: how long a dedupe key lives (0: none)
	Scripts       *QueueScripts
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
	// waiter registry without a refresh (it refreshes every WaiterTTL/3
	// while it waits); 0 means RegistryTTL.
	WaiterTTL time.Duration
	Scripts   *LockScripts
}

// SemaphoreScripts are the scripts of semaphores (see templates/semaphores.go).
type SemaphoreScripts struct {
	Acquire  *Script
	Release  *Script
	Renew    *Script
	State    *Script
	Capacity *Script
}

// SemaphoreDef is the static definition of a semaphore declared in a spec.
type SemaphoreDef struct {
	Name    string // the spec's name, for errors
	Permits int    // capacity, until an operator sets another (SetPermits)
	Lease   time.Duration
	Renew   bool          // the watchdog renews held permits
	Wait    time.Duration // default wait of Acquire
	// WaiterTTL is how long a waiter keeps its place in the semaphore's
	// waiter registry without a refresh (it refreshes every WaiterTTL/3
	// while it waits); 0 means RegistryTTL.
	WaiterTTL time.Duration
	Scripts   *SemaphoreScripts
}

// The runtime's constructors, set by package runtime when it initializes
// (runtime/impl.go) and called by package lockimpl, which gives them their
// types: c is a *runtime.Client, q a *runtime.Quorum, the results the
// runtime's *Lock, *RWLock, *Semaphore, *Latch, *Limiter and *RedLock.
var (
	NewLock      func(c any, def *LockDef, key string) any
	NewRWLock    func(c any, def *LockDef, key string) any
	NewSemaphore func(c any, def *SemaphoreDef, key string) any
	NewLatch     func(c any, def *LatchDef, key string) any
	NewLimiter   func(c any, def *LimiterDef, key string) any
	NewRedLock   func(q any, def *RedLockDef, key string) any
	// SetUpQueue makes q (a new *runtime.Queue[T] or
	// *runtime.ReliableQueue[T]) the queue of def and key over c, with
	// codec (a runtime.Codec[T]).
	SetUpQueue func(q, c any, def *QueueDef, codec any, key string)
	Preload    func(ctx context.Context, c any, scripts ...*Script) error
)
