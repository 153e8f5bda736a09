package rdb

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Semaphore is a semaphore's script operations (templates/semaphore_*.lua):
// a small value, made per call.
type Semaphore struct {
	Conn    *Conn
	Scripts *impl.SemaphoreScripts
	Key     string // the holds
	Permits int    // the spec's capacity
}

// Keys returns the KEYS of the acquire and release scripts: the holds, the
// counts, the capacity and the waiter registry, in one slot.
func (s Semaphore) Keys() []string {
	return []string{s.Key, s.Counts(), s.Capacity(), keys.Sub(s.Key, "queue"), keys.Sub(s.Key, "waiters")}
}

// Counts is the key of the permits per hold.
func (s Semaphore) Counts() string { return keys.Sub(s.Key, "counts") }

// Capacity is the key of the capacity an operator set.
func (s Semaphore) Capacity() string { return keys.Sub(s.Key, "capacity") }

// SemAttempt is one acquire attempt (see Semaphore.Acquire).
type SemAttempt struct {
	Owner string
	N     string // the permits wanted, "*" for every free one
	Lease time.Duration
	Reg   time.Duration // how long a registration lasts (0: do not register)
	// Registered is the script's flag: "0" for a first attempt, "1" for a
	// full attempt of a registered owner, "2" for its refresh.
	Registered string
	// WaitCapacity: a request above the capacity waits for it to grow.
	WaitCapacity bool
}

// Acquire runs semaphore_acquire once:
//
//	KEYS: holds, counts, capacity, queue, waiters (Keys)
//	ARGV: owner, n, lease_ms, spec_capacity, registry_ttl_ms, registered,
//	      prefix, publish, handoff_ms, wait_capacity
//
// The caller decodes its reply (see the script's header).
func (s Semaphore) Acquire(ctx context.Context, a SemAttempt) *redis.Cmd {
	grow := flag0
	if a.WaitCapacity {
		grow = flag1
	}
	registered := flag0
	switch a.Registered {
	case "1":
		registered = flag1
	case "2":
		registered = flag2
	}
	prefix, publish := s.Conn.wake(s.Key)
	return s.Conn.Eval(ctx, s.Scripts.Acquire, s.Keys(),
		a.Owner, a.N, a.Lease.Milliseconds(), s.Permits, a.Reg.Milliseconds(), registered,
		prefix, publish, handoffArg, grow)
}

// Release runs semaphore_release for owner's hold (owner: the id, or an
// argument that counts its sends), or for a waiter for leaving permits
// that gives up (leaving > 0):
//
//	KEYS: holds, counts, capacity, queue, waiters (Keys)
//	ARGV: owner, prefix, publish, spec_capacity, handoff_ms, leaving
//
// semaphore_release reply: int
func (s Semaphore) Release(ctx context.Context, owner any, leaving int) *redis.Cmd {
	prefix, publish := s.Conn.wake(s.Key)
	return s.Conn.Eval(ctx, s.Scripts.Release, s.Keys(), owner, prefix, publish, s.Permits, handoffArg, leaving)
}

// State runs semaphore_state: it evicts the holds whose lease ran out and
// answers {capacity, held}.
//
//	KEYS: holds, counts, capacity
//	ARGV: spec_capacity
//
// semaphore_state reply: {int, int}
func (s Semaphore) State(ctx context.Context) *redis.Cmd {
	return s.Conn.Eval(ctx, s.Scripts.State, []string{s.Key, s.Counts(), s.Capacity()}, s.Permits)
}

// SetCapacity runs semaphore_capacity: mode "set", "tryset", "add" or
// "reset" with value, as operation op (unique across clients: the same in
// every send of the call):
//
//	KEYS: capacity, holds, counts, queue, waiters
//	ARGV: mode, value, spec_capacity, prefix, publish, handoff_ms, op
//
// semaphore_capacity reply: {int, int}
func (s Semaphore) SetCapacity(ctx context.Context, mode string, value int, op string) *redis.Cmd {
	prefix, publish := s.Conn.wake(s.Key)
	return s.Conn.Eval(ctx, s.Scripts.Capacity, []string{s.Capacity(), s.Key, s.Counts(), keys.Sub(s.Key, "queue"), keys.Sub(s.Key, "waiters")},
		mode, value, s.Permits, prefix, publish, handoffArg, op)
}

// Lease runs semaphore_lease: how long owner's hold has left.
//
//	KEYS: holds
//	ARGV: owner
//
// The caller decodes its reply (see the script's header).
func (s Semaphore) Lease(ctx context.Context, owner string) *redis.Cmd {
	return s.Conn.Eval(ctx, s.Scripts.Lease, []string{s.Key}, owner)
}

// SetLease runs semaphore_renew in its set mode: owner's hold is held
// for lease from now, shorter or longer than it was. (The watchdog's
// renewals run it in its extend mode, which never shortens a hold: one
// sent with an older lease that arrives after this leaves it alone.)
//
//	KEYS: holds, counts
//	ARGV: lease_ms, owner, set ('1')
//
// The caller decodes its reply (see the script's header).
func (s Semaphore) SetLease(ctx context.Context, owner string, lease time.Duration) *redis.Cmd {
	return s.Conn.Eval(ctx, s.Scripts.Renew, []string{s.Key, s.Counts()}, lease.Milliseconds(), owner, flag1)
}
