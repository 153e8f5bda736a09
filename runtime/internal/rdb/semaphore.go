package rdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Semaphore is a semaphore's script operations (templates/semaphore_*.lua),
// prepared once per semaphore (the runtime's Semaphore holds one): the
// KEYS its scripts take and the arguments that do not change between
// calls, boxed, so that an operation allocates little more than its
// command (as Lock's).
type Semaphore struct {
	Conn    *Conn
	Scripts *impl.SemaphoreScripts
	Key     string // the holds
	Permits int    // the spec's capacity
	lease   time.Duration
	boxed   []any    // in b: holds, counts, capacity, queue, waiters
	keys    []string // in k
	channel string   // the wake-up prefix with sharded pub/sub (<key>:ch)
	classic *Prefix  // the wake-up prefix with classic pub/sub (<namespace>:wake)
	args    *semArgs
	k       [5]string
	b       [5]any
}

// semArgs are a semaphore definition's constant arguments, boxed.
type semArgs struct {
	permits, lease, reg any
	// what they were boxed from
	leaseD, regD time.Duration
	permitsN     int
}

// Prepare makes s the operations of the semaphore of def at key, on
// conn, whose waiters register for reg, woken on classic or on <key>:ch.
func (s *Semaphore) Prepare(conn *Conn, def *impl.SemaphoreDef, key string, reg time.Duration, classic *Prefix) {
	s.Conn, s.Scripts, s.Key, s.Permits, s.classic = conn, def.Scripts, key, def.Permits, classic
	sfx := [...]string{":counts", ":capacity", ":queue", ":waiters", ":ch"}
	var b strings.Builder
	b.Grow(5*len(key) + 40)
	for _, x := range sfx {
		b.WriteString(key)
		b.WriteString(x)
	}
	all, names := b.String(), [5]string{}
	for i, x := range sfx {
		names[i], all = all[:len(key)+len(x)], all[len(key)+len(x):]
	}
	s.channel = names[4]
	s.keys, s.boxed = s.k[:], s.b[:]
	s.keys[0] = key
	copy(s.keys[1:], names[:4])
	for i, k := range s.keys {
		s.boxed[i] = k
	}
	// Boxed once per definition and client (a definition changed since,
	// or another registry TTL, is boxed again).
	if a, ok := conn.defaults.Load(def); ok {
		if a := a.(*semArgs); a.leaseD == def.Lease && a.regD == reg && a.permitsN == def.Permits {
			s.args = a
			return
		}
	}
	s.args = &semArgs{permits: def.Permits, lease: def.Lease.Milliseconds(), reg: reg.Milliseconds(), leaseD: def.Lease, regD: reg, permitsN: def.Permits}
	conn.defaults.Store(def, s.args)
}

// Keys returns the KEYS of the acquire and release scripts: the holds, the
// counts, the capacity and the waiter registry, in one slot.
func (s *Semaphore) Keys() []string { return s.keys }

// Counts is the key of the permits per hold.
func (s *Semaphore) Counts() string { return s.keys[1] }

// Capacity is the key of the capacity an operator set.
func (s *Semaphore) Capacity() string { return s.keys[2] }

// wake returns the wake-up prefix and the publish command, boxed.
func (s *Semaphore) wake() (prefix, publish any) {
	if s.Conn.Sharded() {
		return s.channel, spublishArg
	}
	return s.classic.Arg, s.Conn.wakePublish()
}

// SemAttempt is one acquire attempt (see Semaphore.Acquire).
type SemAttempt struct {
	Owner string
	N     string // the permits wanted, "*" for every free one
	Lease time.Duration
	Reg   time.Duration // how long a registration lasts (0: do not register)
	// Registered is the script's flag: "0" for a first attempt, "1" for a
	// full attempt of a registered owner, "2" for its refresh, "3" for a
	// first attempt that skips the uncontended check (the client found
	// the semaphore contended lately).
	Registered string
	// WaitCapacity: a request above the capacity waits for it to grow.
	WaitCapacity bool
}

// Acquire runs semaphore_acquire once:
//
//	KEYS: holds, counts, capacity, queue, waiters (Keys)
//	ARGV: owner, n, lease_ms, spec_capacity, registry_ttl_ms, registered,
//	      prefix, publish, handoff_ms, wait_capacity (only when set)
//
// Decode its reply with SemAcquireReply.
func (s *Semaphore) Acquire(ctx context.Context, a SemAttempt) *redis.Cmd {
	registered := flag0
	switch a.Registered {
	case "1":
		registered = flag1
	case "2":
		registered = flag2
	case "3":
		registered = flag3
	}
	// Boxed only when not boxed already: a boxed value is an allocation.
	var n any = flag1
	if a.N != "1" {
		n = a.N
	}
	lease := s.args.lease
	if a.Lease != s.args.leaseD {
		lease = a.Lease.Milliseconds()
	}
	var reg any = zero
	switch {
	case a.Reg == s.args.regD:
		reg = s.args.reg
	case a.Reg != 0:
		reg = a.Reg.Milliseconds()
	}
	prefix, publish := s.wake()
	if !a.WaitCapacity { // the script's default: one argument less
		return s.Conn.EvalBoxed(ctx, s.Scripts.Acquire, s.boxed,
			a.Owner, n, lease, s.args.permits, reg, registered,
			prefix, publish, handoffArg)
	}
	return s.Conn.EvalBoxed(ctx, s.Scripts.Acquire, s.boxed,
		a.Owner, n, lease, s.args.permits, reg, registered,
		prefix, publish, handoffArg, flag1)
}

// SemAcquireReply decodes semaphore_acquire's reply into buf: a table as
// it is, or the fast path's integer n as {1, 0, n} (taken, n permits),
// with fast true.
//
//	semaphore_acquire reply: int | {int, int, int} | {int, int}
func SemAcquireReply(cmd *redis.Cmd, buf *[3]int64) (res []int64, fast bool, err error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, false, err
	}
	switch v := v.(type) {
	case int64:
		buf[0], buf[1], buf[2] = 1, 0, v
		return buf[:3], true, nil
	case []any:
		if len(v) == 2 || len(v) == 3 {
			for i, e := range v {
				n, ok := e.(int64)
				if !ok {
					return nil, false, fmt.Errorf("unexpected reply %v", v)
				}
				buf[i] = n
			}
			return buf[:len(v)], false, nil
		}
	}
	return nil, false, fmt.Errorf("unexpected reply %v", v)
}

// Release runs semaphore_release for owner's hold (owner: the id, or an
// argument that counts its sends), or for a waiter for leaving permits
// that gives up (leaving > 0):
//
//	KEYS: holds, counts, capacity, queue, waiters (Keys)
//	ARGV: owner, prefix, publish, spec_capacity, handoff_ms, leaving
//
// semaphore_release reply: int
func (s *Semaphore) Release(ctx context.Context, owner any, leaving int) *redis.Cmd {
	prefix, publish := s.wake()
	var l any = flag0
	if leaving != 0 {
		l = leaving
	}
	return s.Conn.EvalBoxed(ctx, s.Scripts.Release, s.boxed, owner, prefix, publish, s.args.permits, handoffArg, l)
}

// ReleaseFast runs semaphore_release for owner's hold (owner: the id, or
// an argument that counts its sends) with the holds' and counts' keys
// and the owner alone: what a release reads while nobody waits. It
// answers HandOnDue, having changed nothing, when waiters may be
// registered: then send Release.
//
//	KEYS: holds, counts
//	ARGV: owner
//
// semaphore_release reply: int
func (s *Semaphore) ReleaseFast(ctx context.Context, owner any) *redis.Cmd {
	return s.Conn.EvalBoxed(ctx, s.Scripts.Release, s.boxed[:2], owner)
}

// State runs semaphore_state: it evicts the holds whose lease ran out and
// answers {capacity, held}.
//
//	KEYS: holds, counts, capacity
//	ARGV: spec_capacity
//
// semaphore_state reply: {int, int}
func (s *Semaphore) State(ctx context.Context) *redis.Cmd {
	return s.Conn.Eval(ctx, s.Scripts.State, s.keys[:3], s.args.permits)
}

// SetCapacity runs semaphore_capacity: mode "set", "tryset", "add" or
// "reset" with value, as operation op (unique across clients: the same in
// every send of the call), stored for ttl when it is positive:
//
//	KEYS: capacity, holds, counts, queue, waiters
//	ARGV: mode, value, spec_capacity, prefix, publish, handoff_ms, op[, ttl_ms]
//
// semaphore_capacity reply: {int, int}
func (s *Semaphore) SetCapacity(ctx context.Context, mode string, value int, op string, ttl time.Duration) *redis.Cmd {
	prefix, publish := s.wake()
	keys := []string{s.keys[2], s.keys[0], s.keys[1], s.keys[3], s.keys[4]}
	if ttl > 0 {
		return s.Conn.Eval(ctx, s.Scripts.Capacity, keys, mode, value, s.Permits, prefix, publish, handoffArg, op, ttl.Milliseconds())
	}
	return s.Conn.Eval(ctx, s.Scripts.Capacity, keys, mode, value, s.Permits, prefix, publish, handoffArg, op)
}

// Lease runs semaphore_lease: how long owner's hold has left.
//
//	KEYS: holds, counts
//	ARGV: owner
//
// The caller decodes its reply (see the script's header).
func (s *Semaphore) Lease(ctx context.Context, owner string) *redis.Cmd {
	return s.Conn.Eval(ctx, s.Scripts.Lease, s.keys[:2], owner)
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
func (s *Semaphore) SetLease(ctx context.Context, owner string, lease time.Duration) *redis.Cmd {
	return s.Conn.Eval(ctx, s.Scripts.Renew, s.keys[:2], lease.Milliseconds(), owner, flag1)
}

// Split runs semaphore_split: owner's hold of 1 + len(owners) permits
// becomes one permit each for owner and owners, with its expiry.
//
//	KEYS: holds, counts
//	ARGV: owner, owners...
//
// The caller decodes its reply (see the script's header).
func (s *Semaphore) Split(ctx context.Context, owner string, owners []string) *redis.Cmd {
	args := make([]any, 0, 1+len(owners))
	args = append(args, owner)
	for _, o := range owners {
		args = append(args, o)
	}
	return s.Conn.Eval(ctx, s.Scripts.Split, s.keys[:2], args...)
}
