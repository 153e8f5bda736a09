// Package defs maps a spec's objects to the runtime's definitions
// (lockimpl.LockDef and the like): the one path from spec to definition.
// The generator renders these values as Go literals into the generated
// file (internal/gen), and lockgen inspect builds the same values at run
// time (inspect), as protobuf-go's generated code and dynamicpb share one
// descriptor builder. A definition's Scripts are the runtime's own
// (lockimpl.Scripts); generated code refers to its pinned set instead.
package defs

import (
	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// LockKinds maps each lock kind the runtime runs as a lockimpl.Lock to
// its runtime kind; a redlock is a RedLock (see RedLock).
var LockKinds = map[spec.LockKind]lockimpl.LockKind{
	spec.Reentrant: lockimpl.Reentrant,
	spec.Simple:    lockimpl.Simple,
	spec.Fair:      lockimpl.Fair,
	spec.ReadWrite: lockimpl.ReadWrite,
	spec.Fenced:    lockimpl.Fenced,
	spec.Leader:    lockimpl.Fenced, // a fenced lock, campaigned for (lockrt.Election)
}

// LimiterAlgorithms maps each limiter algorithm to the runtime's.
var LimiterAlgorithms = map[string]lockimpl.LimiterAlgorithm{
	spec.GCRA:          lockimpl.GCRA,
	spec.TokenBucket:   lockimpl.TokenBucket,
	spec.SlidingWindow: lockimpl.SlidingWindow,
}

// LimiterScopes maps each limiter scope to the runtime's.
var LimiterScopes = map[string]lockimpl.LimiterScope{
	spec.ScopeOverall:   lockimpl.ScopeOverall,
	spec.ScopePerClient: lockimpl.ScopePerClient,
}

// Key returns the key pattern of an object of a spec with namespace ns.
func Key(ns string, o spec.Object) lockimpl.KeyDef {
	return lockimpl.KeyDef{Namespace: ns, Object: o.Identity(), Literals: o.Key.Literals}
}

// Lock returns the definition of a lock that is not a redlock.
func Lock(l *spec.Lock) *lockimpl.LockDef {
	kind := LockKinds[l.Kind]
	d := &lockimpl.LockDef{
		Name: l.Name, Kind: kind, Lease: l.Lease, Renew: l.Renew, Wait: l.Wait,
		Scripts: lockimpl.Scripts().Locks(kind),
	}
	if l.Sync != nil {
		d.Sync = lockimpl.SyncDef{Replicas: l.Sync.Replicas, Timeout: l.Sync.Timeout}
	}
	return d
}

// RedLock returns the definition of a redlock.
func RedLock(l *spec.Lock) *lockimpl.RedLockDef {
	return &lockimpl.RedLockDef{
		Name: l.Name, Lease: l.Lease, Renew: l.Renew, Wait: l.Wait,
		Scripts: lockimpl.Scripts().RedLocks(),
	}
}

// Semaphore returns the definition of a semaphore.
func Semaphore(s *spec.Semaphore) *lockimpl.SemaphoreDef {
	return &lockimpl.SemaphoreDef{
		Name: s.Name, Permits: s.Permits, Lease: s.Lease, Renew: s.Renew, Wait: s.Wait,
		Scripts: lockimpl.Scripts().Semaphores(),
	}
}

// Latch returns the definition of a count-down latch.
func Latch(l *spec.Latch) *lockimpl.LatchDef {
	return &lockimpl.LatchDef{Name: l.Name, Count: l.Count, Expire: l.Expire, Scripts: lockimpl.Scripts().Latches()}
}

// Limiter returns the definition of a rate limiter.
func Limiter(l *spec.Limiter) *lockimpl.LimiterDef {
	alg := LimiterAlgorithms[l.Algorithm]
	return &lockimpl.LimiterDef{
		Name: l.Name, Algorithm: alg, Rate: l.Rate, Per: l.Per, Burst: l.Burst,
		Scope: LimiterScopes[l.Scope], IdleTTL: l.IdleTTL,
		Scripts: lockimpl.Scripts().Limiters(alg),
	}
}

// Queue returns the definition of a queue.
func Queue(q *spec.Queue) *lockimpl.QueueDef {
	d := &lockimpl.QueueDef{Name: q.Name, Delay: q.Delay, Reliable: q.Reliable != nil, Scripts: lockimpl.Scripts().Queues()}
	if r := q.Reliable; r != nil {
		d.Visibility, d.MaxDeliveries, d.Dedupe = r.Visibility, r.MaxDeliveries, q.Unique
	}
	if r := q.Retention; r != nil {
		d.Retention, d.RetainMax = r.For, r.Max
	}
	return d
}

// CatchUps maps each schedule catch-up policy to the runtime's.
var CatchUps = map[string]lockimpl.CatchUp{
	spec.CatchUpNone:   lockimpl.CatchUpNone,
	spec.CatchUpLatest: lockimpl.CatchUpLatest,
	spec.CatchUpAll:    lockimpl.CatchUpAll,
}

// Schedule returns the definition of a schedule.
func Schedule(s *spec.Schedule) *lockimpl.ScheduleDef {
	return &lockimpl.ScheduleDef{
		Name: s.Name, ID: s.Identity(), Cron: s.Cron, Every: s.Every, Timezone: s.Timezone, Jitter: s.Jitter,
		CatchUp: CatchUps[s.CatchUp], MaxCatchUp: s.MaxCatchUp, Scripts: lockimpl.Scripts().Schedules(),
	}
}

// ScheduleKey returns the key of a schedule's state hash in a spec with
// namespace ns: its own, namespace:{Name:}, or for a schedule that
// targets a queue <queue key>:schedule:<Name> (in the queue's slot).
func ScheduleKey(ns string, s *spec.Schedule) string {
	if s.Target != nil {
		k := Key(ns, s.Target.Object)
		return keys.Sub(k.Key(), "schedule:"+s.Identity())
	}
	k := Key(ns, s.Object)
	return k.Key()
}
