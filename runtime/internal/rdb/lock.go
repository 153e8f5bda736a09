package rdb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Lock is one lock's script operations, prepared once per lock (the
// runtime's Lock holds one): the KEYS its scripts take and the arguments
// that do not change between calls, boxed, so that an operation
// allocates little more than its command. Its methods are the lock
// scripts' operations (templates/<kind>_acquire.lua and the others); each
// states the contract it sends by, which the scripts' headers hold.
type Lock struct {
	conn    *Conn
	scripts *impl.LockScripts
	kind    impl.LockKind
	sync    impl.SyncDef
	mode    any      // a read-write lock's side ("r" or "w"), its scripts' argument after the others; nil for the other kinds
	keys    []string // in k
	boxed   []any    // in b: keys
	channel string   // the wake-up prefix with sharded pub/sub (<key>:ch)
	classic *Prefix  // the wake-up prefix with classic pub/sub (<namespace>:wake)
	*defaults
	k [4]string
	b [4]any
}

// Prefix is a classic wake-up prefix, and it boxed: one per namespace
// and client.
type Prefix struct {
	Name string
	Arg  any
}

// NewPrefix returns name as a Prefix.
func NewPrefix(name string) *Prefix { return &Prefix{Name: name, Arg: name} }

// defaults are a LockDef's arguments, boxed once per client.
type defaults struct {
	lease any // the spec's lease in milliseconds
	reg   any // the registry TTL in milliseconds
	// told is the hand-off lease a release of a lock the watchdog does
	// not renew gives, "l<lease ms>" (see hand_on), nil for the others
	told any
	// what they were boxed from (a LockDef changed since is boxed again)
	leaseD, regD time.Duration
	renew        bool
}

// Boxed arguments that cost no allocation per call.
var (
	flag0, flag1, flag2, flag3  any = "0", "1", "2", "3"
	zero                        any = int64(0)
	publishArg, spublishArg     any = "publish", "spublish"
	blindPublishArg             any = "publish!" // see Conn.wakePublish
	handoffArg                  any = impl.HandoffLease.Milliseconds()
	suffixes                        = [...]string{":queue", ":waiters", ":fence", ":ch"}
	rwSuffixes                      = [...]string{":holds", ":queue", ":waiters", ":ch"}
	modeRead, modeWrite, noMode any = "r", "w", nil
)

// Prepare makes l the operations of the lock of def at key, on conn
// ("r" or "w": the side of a read-write lock, "" for the other kinds),
// whose waiters keep their registration for reg, woken on classic or on
// <key>:ch.
func (l *Lock) Prepare(conn *Conn, def *impl.LockDef, key, mode string, reg time.Duration, classic *Prefix) {
	l.conn, l.scripts, l.kind, l.sync, l.classic = conn, def.Scripts, def.Kind, def.Sync, classic
	switch mode {
	case "r":
		l.mode = modeRead
	case "w":
		l.mode = modeWrite
	}
	// The KEYS: the lock's key, then the kind's (all in the lock's hash
	// slot), and the channel: one string for every derived name (they
	// are slices of it).
	sfx, n := suffixes, 3
	switch def.Kind {
	case impl.Fenced:
		n = 4
	case impl.ReadWrite:
		sfx, n = rwSuffixes, 4
	}
	var b strings.Builder
	b.Grow(4*len(key) + 24)
	for _, s := range sfx {
		b.WriteString(key)
		b.WriteString(s)
	}
	all, names := b.String(), [4]string{}
	for i, s := range sfx {
		names[i], all = all[:len(key)+len(s)], all[len(key)+len(s):]
	}
	l.channel = names[3]
	l.keys, l.boxed = l.k[:n], l.b[:n]
	l.keys[0] = key
	copy(l.keys[1:], names[:n-1])
	for i, k := range l.keys {
		l.boxed[i] = k
	}
	if a, ok := conn.defaults.Load(def); ok && a.(*defaults).leaseD == def.Lease && a.(*defaults).regD == reg && a.(*defaults).renew == def.Renew {
		l.defaults = a.(*defaults)
	} else {
		l.defaults = &defaults{lease: def.Lease.Milliseconds(), reg: reg.Milliseconds(), leaseD: def.Lease, regD: reg, renew: def.Renew}
		if !def.Renew && def.Kind != impl.Fair && def.Kind != impl.ReadWrite {
			l.defaults.told = fmt.Sprintf("l%d", def.Lease.Milliseconds())
		}
		conn.defaults.Store(def, l.defaults)
	}
}

// Side makes l the operations of the other side ("r" or "w") of the
// read-write lock it was prepared for: a copy of a prepared Lock keeps
// its keys (its slices point into the original's arrays).
func (l *Lock) Side(mode string) {
	if mode == "r" {
		l.mode = modeRead
	} else {
		l.mode = modeWrite
	}
}

// Keys returns the KEYS of the lock's scripts: the lock's key, then its
// kind's.
func (l *Lock) Keys() []string { return l.keys }

// Channel returns the prefix of the wake-up channels of the lock's
// waiters: <key>:ch with sharded pub/sub, the namespace's otherwise.
func (l *Lock) Channel() string {
	if l.conn.Sharded() {
		return l.channel
	}
	return l.classic.Name
}

// Args returns args, then the side of a read-write lock: the ARGV of a
// script that takes it last (renew).
func (l *Lock) Args(args ...any) []any {
	if l.mode != nil {
		args = append(args, l.mode)
	}
	return args
}

// wake returns the wake-up prefix and the publish command, boxed.
func (l *Lock) wake() (prefix, publish any) {
	if l.conn.Sharded() {
		return l.channel, spublishArg
	}
	return l.classic.Arg, l.conn.wakePublish()
}

// lease returns d in milliseconds, boxed (without an allocation when it
// is the spec's).
func (l *Lock) lease(d time.Duration) any {
	if d == l.leaseD {
		return l.defaults.lease
	}
	return d.Milliseconds()
}

// Attempt is one acquire attempt (see Acquire).
type Attempt struct {
	Owner string
	Lease time.Duration
	// Reg is how long a registration lasts when the lock is held (0: do
	// not register).
	Reg time.Duration
	// Waiting: the owner is registered already and only refreshes its
	// entry while the lock is held by another.
	Waiting bool
	// Op names a re-entry (an owner carried from a hold); "" for a new
	// owner.
	Op string
	// Contended: a first attempt on a lock the client found held by
	// another owner lately; a fair or read-write lock's script then skips
	// its uncontended check (the registered flag '3').
	Contended bool
}

// SkipsFastCheck reports whether kind's acquire script starts with an
// uncontended check that Attempt.Contended skips.
func SkipsFastCheck(kind impl.LockKind) bool { return kind == impl.Fair || kind == impl.ReadWrite }

// Acquire runs the acquire script once (reentrant_acquire, simple_acquire,
// fair_acquire, rw_acquire, fenced_acquire):
//
//	KEYS: the lock, then its kind's (Keys)
//	ARGV: lease_ms, owner, registry_ttl_ms?, registered?, (fair and
//	      read-write:) wake prefix, publish command, hand-off lease,
//	      (read-write:) side, op?
//
// The trailing arguments a script defaults are left off: a new owner's
// first attempt with the default registration sends lease and owner
// alone. For a lock with replica sync WAIT follows in the same round trip
// (Conn.EvalWait) and wait is its reply; nil otherwise. Decode the reply
// with AcquireReply.
func (l *Lock) Acquire(ctx context.Context, a Attempt) (cmd, wait *redis.Cmd) {
	var buf [10]any
	args := append(buf[:0], l.lease(a.Lease), a.Owner)
	var reg any = zero
	switch {
	case a.Reg == l.regD:
		reg = l.defaults.reg
	case a.Reg != 0:
		reg = a.Reg.Milliseconds()
	}
	flag := flag0
	switch {
	case a.Waiting:
		flag = flag2 // refresh, or the full attempt when that is needed
	case a.Contended && SkipsFastCheck(l.kind):
		flag = flag3
	}
	args = append(args, reg, flag)
	if l.kind == impl.Fair || l.kind == impl.ReadWrite { // it may hand a free lock to the first waiters
		prefix, publish := l.wake()
		args = append(args, prefix, publish, handoffArg)
	}
	if l.mode != nil {
		args = append(args, l.mode)
	}
	if a.Op != "" && !a.Waiting && l.kind != impl.Simple { // a re-entry names its operation
		args = append(args, a.Op)
	}
	if len(args) == 4 && !a.Waiting { // a first attempt leaves the registered flag out
		args = args[:3]
		if a.Reg == impl.LiveRegistryTTL { // the scripts' default: one argument less
			args = args[:2]
		}
	}
	if l.sync.Replicas > 0 {
		// (A copy: the pipeline keeps its arguments, and buf stays on
		// the stack.)
		return l.conn.EvalWait(ctx, l.scripts.Acquire, l.sync, l.keys, slices.Clone(args)...)
	}
	return l.conn.EvalBoxed(ctx, l.scripts.Acquire, l.boxed, args...), nil
}

// AcquireReply decodes an acquire script's reply into buf: a table of 2
// or 3 integers as it is, or the integer n of an uncontended fast path as
// {1, n} (taken, n holds), or for a fenced lock (fenced) as {1, 1, n}
// (taken, one hold, token n), with fast true. The replies, as the acquire
// scripts' headers state them:
//
//	reentrant_acquire reply: int | {int, int}
//	simple_acquire reply: int | {int, int}
//	fair_acquire reply: int | {int, int}
//	rw_acquire reply: int | {int, int}
//	fenced_acquire reply: int | {int, int, int} | {int, int}
func AcquireReply(cmd *redis.Cmd, buf *[3]int64, fenced bool) (res []int64, fast bool, err error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, false, err
	}
	switch v := v.(type) {
	case int64:
		if fenced {
			buf[0], buf[1], buf[2] = 1, 1, v
			return buf[:3], true, nil
		}
		buf[0], buf[1] = 1, v
		return buf[:2], true, nil
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

// HandOnDue is the release scripts' reply to ReleaseFast when the release
// would hand the lock to a waiter or leave holds: nothing changed, and
// the release is sent again with Release.
const HandOnDue = -3

// ReleaseFast runs the release script with the lock's key alone, for a
// hold the acquire's fast path took (reentrant, simple, fenced and fair
// locks: a read-write lock's release finds its fast path's hold in the
// full call):
//
//	KEYS: the lock
//	ARGV: owner, lease_ms (when withLease: a reentrant or fenced lock the
//	      watchdog does not renew, whose holds left keep the lease; never
//	      for a fair lock, whose script answers HandOnDue for holds left)
//
// owner is the owner id, or an argument that counts its sends.
//
//	reentrant_release reply: int
//	simple_release reply: int
//	fair_release reply: int
func (l *Lock) ReleaseFast(ctx context.Context, owner any, lease time.Duration, withLease bool) *redis.Cmd {
	if withLease && l.kind != impl.Fair {
		return l.conn.EvalBoxed(ctx, l.scripts.Release, l.boxed[:1], owner, l.lease(lease))
	}
	return l.conn.EvalBoxed(ctx, l.scripts.Release, l.boxed[:1], owner)
}

// Release runs the release script for one hold of owner with lease, as
// operation op (kinds with several holds record it; a simple lock's is
// not sent); leaving when owner is a waiter that gives up:
//
//	KEYS: the lock, then its kind's (Keys)
//	ARGV: owner, lease_ms, wake prefix, publish command, hand-off lease
//	      ("l<spec lease ms>" for a simple, reentrant or fenced lock the
//	      watchdog does not renew, where receivers are counted), leaving
//	      ('1' or '0'), (read-write:) side, op
//
//	fair_release reply: int
//	rw_release reply: int
func (l *Lock) Release(ctx context.Context, owner any, lease time.Duration, leaving bool, op string) *redis.Cmd {
	flag := flag0
	if leaving {
		flag = flag1
	}
	prefix, publish := l.wake()
	handoff := handoffArg
	if l.told != nil && l.conn.CountsReceivers() {
		// A lock the watchdog does not renew is handed on with its spec's
		// lease, told to the waiter, which then need not extend it. (Where
		// the count of receivers is blind, a waiter that went away could
		// get it: then the short hand-off lease.)
		handoff = l.told
	}
	var buf [8]any
	args := append(buf[:0], owner, l.lease(lease), prefix, publish, handoff, flag)
	if l.mode != nil {
		args = append(args, l.mode)
	}
	if l.kind != impl.Simple {
		args = append(args, op)
	}
	return l.conn.EvalBoxed(ctx, l.scripts.Release, l.boxed, args...)
}

// ForceUnlock runs the force-unlock script: it deletes the lock whoever
// holds it and wakes its waiters.
//
//	KEYS: the lock, then its kind's (Keys)
//	ARGV: wake prefix (ch: an argument that counts its sends), publish
//	      command, hand-off lease
//
//	force_unlock reply: int
//	fair_force_unlock reply: int
//	rw_force_unlock reply: int
func (l *Lock) ForceUnlock(ctx context.Context, ch any) *redis.Cmd {
	_, publish := l.wake()
	return l.conn.EvalBoxed(ctx, l.scripts.ForceUnlock, l.boxed, ch, publish, handoffArg)
}
