package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/values"
	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// The constructor generated code calls, through package lockimpl (see
// runtime/internal/impl).
func init() {
	impl.NewLock = func(c any, def *impl.LockDef, key string) any { return c.(*Client).newLock(def, key) }
}

// Lock is one distributed lock: a generated constructor's result, such as
// locks.Order(42). It is a small value that does not contact Redis until a
// method is called; make as many as you like. Its kind (reentrant or
// simple), lease, renewal and default wait come from the spec.
//
// Ownership is carried by the lease, not by the goroutine: Lock returns a
// *Lease whose Context identifies its holder. Locking again with that
// context (or one derived from it) re-enters a reentrant lock, from any
// goroutine; each Lock needs its own Unlock.
type Lock struct {
	c   *Client
	def *impl.LockDef
	key string
	// mode is the side of a readwrite lock ("r" or "w"), passed to its
	// scripts as their last argument; "" for the other kinds.
	mode string
	// ops are its scripts' calls, prepared once per Lock (keys and
	// constant arguments boxed): runtime/internal/rdb.
	ops rdb.Lock
}

// Key returns the Redis key of the lock.
func (l *Lock) Key() string { return l.key }

// Name returns the lock's name in the spec.
func (l *Lock) Name() string { return l.def.Name }

// channel is the prefix of the wake-up channels of l's waiters (see
// wakePrefix).
func (l *Lock) channel() string { return l.ops.Channel() }

// waitChannel is the channel l's waiters on this client wait on: every
// lock kind keeps a waiter registry (see "Waiter registry" in the package
// doc), whose releases name the waiters they wake on their client's
// channel.
func (l *Lock) waitChannel() string { return l.channel() + ":" + l.c.id }

// Lock acquires the lock, waiting while another owner holds it: until the
// context's deadline when it has one, otherwise for the spec's default
// wait. Waiting costs no Redis traffic: the waiter is woken by the
// release's pub/sub message, with the holder's remaining lease as a
// fallback timer. The context bounds the wait, not the hold: the lease's
// Context keeps its values but not its cancellation (unless
// WithParentCancel), see "Lifetimes and deadlines" in the package doc. A context that
// has ended already takes nothing.
//
// It returns ErrNotObtained when the wait ran out (also matching the
// context's error when the context ended it, also before or while the
// lock was being taken: then nothing stays held), ErrNotReentrant when a
// simple lock is already held by the owner in ctx, ErrUpgrade when the
// write side of an RWLock is asked for by an owner holding its read side,
// ErrInvalidArgument for a lease option out of range, ErrClosed after the
// client was closed, or a Redis error.
func (l *Lock) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	o, err := acquireOpts(l.def.Lease, opts)
	if err != nil {
		return nil, err
	}
	return l.acquire(ctx, defaultWait(ctx, l.def.Wait), o)
}

// TryLock acquires the lock, waiting at most wait (0: try once) and no
// longer than the context allows. It returns the errors Lock returns, and
// ErrInvalidArgument for a negative wait.
func (l *Lock) TryLock(ctx context.Context, wait time.Duration, opts ...AcquireOption) (*Lease, error) {
	if err := checkWait(wait); err != nil {
		return nil, err
	}
	o, err := acquireOpts(l.def.Lease, opts)
	if err != nil {
		return nil, err
	}
	if wait > 0 {
		o.end = time.Now().Add(wait) // its attempts end with the wait too
	}
	return l.acquire(ctx, wait, o)
}

// acquire takes the lock; wait < 0 means as long as ctx allows.
func (l *Lock) acquire(ctx context.Context, wait time.Duration, o acquireOptions) (le *Lease, err error) {
	if len(l.c.observers) > 0 { // an unobserved Lock reads the clock once
		var end func(error)
		ctx, end = l.c.start(ctx, OpLock, l.def.Name)
		defer func(t time.Time) { l.c.acquired(ctx, end, l.def.Name, t, err) }(time.Now())
	}
	owner, carried := ctx.Value(ownerKey{}).(string)
	o.fresh = !carried
	if !carried {
		owner = l.c.newOwner()
	}
	reg := time.Duration(0) // no registry entry for a try that does not wait
	if wait != 0 {
		reg = l.waitTTL()
	}
	var trust handoffTrust
	trust.sending()
	if carried && l.def.Kind != impl.Simple {
		o.op = l.c.newOp() // every attempt of this re-entry names it
	}
	le, ttl, err := l.attempt(ctx, owner, o, reg, false, trust.sent)
	if le != nil || failFast(err, wait) {
		if err != nil && o.fresh && (rdb.IsConnError(err) || errors.Is(err, context.Canceled)) {
			// Cut short by the deadline, or no reply after go-redis'
			// retries: the script may have run. Leaving gives back what
			// it may have taken (in the background past cleanUpWait).
			l.leave(ctx, owner, o.lease)
		}
		return le, err
	}
	if wait == 0 {
		return nil, ErrNotObtained
	}
	obj := waitObject{name: l.def.Name, key: l.key, reg: l.registration(owner, reg, ttl), tried: trust.sent}
	obj.settled = l.heldByOther(owner, obj.reg)
	sleep := l.c.waitSleep(obj.reg)
	err = l.c.waitFor(ctx, wait, obj, l.waitChannel(), owner, true, sleep, func(msg string) (bool, time.Duration, error) {
		var err error
		if msg != "" {
			if le, err = l.handed(ctx, owner, o, msg, &trust); le != nil || err != nil {
				return le != nil, 0, err
			}
		}
		prev := trust.sending()
		le, _, err = l.attempt(ctx, owner, o, reg, true, trust.sent)
		trust.replied(prev)
		if msg != "" && carried && le == nil && err == nil {
			// The message was not this wait's: it may be another's of
			// this owner.
			l.c.wakeOwner(owner, obj.reg.reg.Waiters)
		}
		return le != nil, sleep, err
	})
	if err != nil {
		if le == nil {
			l.leave(ctx, owner, o.lease)
		}
		return nil, err
	}
	return le, nil
}

// heldByOther returns a wait's settled check (waitObject, settledBy) for
// the waiter r of owner: true when another owner's hold is in its way.
// For a lock whose hold is a string naming its owner first (reentrant,
// simple, fenced), a GET of it; for a fair lock, whose hold is a hash of
// its owner's holds (and "s", the compact hold's mark), an HKEYS that
// finds another owner's field; for either side of
// a read-write lock, an HGET of its hash's writer: another owner's write
// hold blocks both sides (readers alone in a writer's way take more than
// one read to tell: the wait tries again).
func (l *Lock) heldByOther(owner string, r *registration) func(ctx context.Context) bool {
	var read func(ctx context.Context, p redis.Pipeliner) func() bool
	switch {
	case l.mode != "":
		read = func(ctx context.Context, p redis.Pipeliner) func() bool {
			w := p.HGet(ctx, r.reg.Single, "writer")
			return func() bool { return w.Err() == nil && w.Val() != owner }
		}
	case l.def.Kind == impl.Fair:
		read = func(ctx context.Context, p redis.Pipeliner) func() bool {
			fields := p.HKeys(ctx, l.key)
			return func() bool {
				return fields.Err() == nil && slices.ContainsFunc(fields.Val(), func(f string) bool { return f != owner && f != "s" })
			}
		}
	default:
		read = func(ctx context.Context, p redis.Pipeliner) func() bool {
			get := p.Get(ctx, l.key)
			return func() bool {
				if get.Err() != nil { // (redis.Nil: no hold)
					return false
				}
				holder, _, _ := strings.Cut(get.Val(), " ")
				return holder != owner
			}
		}
	}
	return l.c.settledBy(r, read)
}

// handed returns the lease of a lock a release handed to owner, as msg
// ("<owner>[ <token>]") says; trust knows when owner's last attempt was
// sent (before the release). The hand-off's lease in Redis is
// HandoffLease: a hold the watchdog renews, or one whose whole lease fits
// in that, is owner's at once (its first renewal comes within a third of
// it) when trust finds the message fresh; a late or suspect message, a
// longer fixed lease, or an owner carried from an earlier lease (a
// message of an earlier wait of that owner, kept by the hub for an owner
// not joined, may name it; a new owner's messages are all of this wait)
// is confirmed by the next attempt instead (nil lease, nil error), which
// extends the hold to the lease, or queues owner again when the hand-off
// ran out. A fenced lock's token is checked as an
// acquire's is: ErrFenceReset, the lock given back, when it is not larger
// than the last one this client saw for the lock.
func (l *Lock) handed(ctx context.Context, owner string, o acquireOptions, msg string, trust *handoffTrust) (*Lease, error) {
	rest, ok := strings.CutPrefix(msg, owner)
	if !ok || !o.fresh {
		return nil, nil
	}
	rest, told := handoffTold(rest)
	first := HandoffLease // until the watchdog's first renewal
	if !l.def.Renew {
		switch {
		case told >= o.lease: // the release gave it the spec's lease, which this hold wants
			first = o.lease
		case o.lease > HandoffLease:
			return nil, nil // an attempt extends it to the lease
		}
	}
	rest, ms := handoffTime(rest)
	start, ok := trust.startFor(l.c, l.key, ms, min(first, o.lease))
	if !ok {
		return nil, nil
	}
	le, err := l.newLeaseFirst(ctx, owner, o, start, first)
	if le != nil && rdb.SkipsFastCheck(l.def.Kind) {
		l.c.contended.saw(l.key)
	}
	if le == nil || rest == "" {
		return le, err
	}
	le.token, err = strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	if err == nil {
		err = l.c.fences.check(l.key, 1, le.token)
	} else {
		err = fmt.Errorf("lockgen: acquiring %s: a hand-off without a token: %q", l.key, msg)
	}
	if err != nil {
		_ = le.Unlock(context.WithoutCancel(ctx))
		return nil, err
	}
	return le, nil
}

// leave takes owner, a waiter that gives up, out of l's registry; a lock
// a release handed to it meanwhile is handed on. It is best effort: an
// entry left behind is passed over after its deadline.
// The caller waits for it at most cleanUpWait (see cleanUp).
func (l *Lock) leave(ctx context.Context, owner string, lease time.Duration) {
	cleanUp(ctx, func(ctx context.Context) {
		_ = l.ops.Release(ctx, owner, lease, true, l.c.newOp()).Err()
	})
}

// attempt runs the acquire script once, registering owner as a waiter for
// reg when the lock is held (0: not), with waiting set when owner is
// registered already: then, while another owner holds the lock and owner
// is still registered, the script only refreshes owner's entry (ZADD XX
// and the keys' PEXPIRE: a waiter's periodic call is that small) and makes
// the full attempt otherwise (a read-write lock's script: while a live
// hold blocks it, see rw_acquire). start is the time the attempt is sent
// (a lease taken counts from it). It returns a lease when the lock was taken, or the
// holder's remaining TTL. It takes nothing when ctx has ended, and gives
// back what it took when ctx ended meanwhile.
func (l *Lock) attempt(ctx context.Context, owner string, o acquireOptions, reg time.Duration, waiting bool, start time.Time) (*Lease, time.Duration, error) {
	if err := l.c.checkOpen(); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, waitError(ctx, err)
	}
	// The attempt is not cut short by ctx's cancellation: a script that
	// ran in Redis while its reply was abandoned would hold the lock for
	// a whole lease with nobody to release it. A new owner's attempt keeps
	// ctx's deadline (see attemptContext): when that cuts it short, the
	// owner leaves (releasing what the script may have taken) in the
	// background.
	uctx, cancel := attemptContext(ctx, o.fresh, o.end)
	defer cancel()
	a := rdb.Attempt{Owner: owner, Lease: o.lease, Reg: reg, Waiting: waiting, Op: o.op}
	contends := rdb.SkipsFastCheck(l.def.Kind)
	if contends && !waiting && o.op == "" {
		a.Contended = l.c.contended.recently(l.key)
	}
	var cmd, wait *redis.Cmd
	if _, bounded := uctx.Deadline(); bounded {
		// go-redis may overrun a deadline (a connection that never
		// answers its handshake waits for DialTimeout): the call goes on
		// alone past it, and the owner leaves below.
		r, ok := within(uctx, func() [2]*redis.Cmd {
			cmd, wait := l.ops.Acquire(uctx, a)
			return [2]*redis.Cmd{cmd, wait}
		})
		if cmd, wait = r[0], r[1]; !ok {
			cmd = lateCmd(uctx)
		}
	} else {
		cmd, wait = l.ops.Acquire(uctx, a)
	}
	var buf [3]int64
	res, fast, err := rdb.AcquireReply(cmd, &buf, l.def.Kind == impl.Fenced)
	if err != nil {
		return nil, 0, attemptError(l.key, err)
	}
	if o.fresh && res[0] == -1 {
		// A simple lock this new owner holds already: an earlier run of
		// this acquire took it and its reply was lost.
		res[0] = 1
	}
	switch res[0] {
	case 1:
		le, err := l.newLease(ctx, owner, o, start)
		if err != nil {
			return nil, 0, err
		}
		// A read-write lock's fast-path hold is released by the full
		// call (its script finds it there): the trimmed call could not
		// release it once re-entered (rdb.Lock.ReleaseFast).
		le.fast = fast && l.def.Kind != impl.ReadWrite
		if len(res) == 3 {
			le.token = res[2]
			if err := l.c.fences.check(l.key, res[1], res[2]); err != nil {
				_ = le.Unlock(uctx)
				return nil, 0, err
			}
		}
		if err := l.checkSynced(uctx, le, wait); err != nil {
			return nil, 0, err
		}
		if err := ctx.Err(); err != nil {
			// Cancelled while the script ran: give the hold back.
			_ = le.Unlock(ctx)
			return nil, 0, waitError(ctx, err)
		}
		return le, 0, nil
	case -1:
		return nil, 0, ErrNotReentrant
	case -2:
		return nil, 0, ErrUpgrade
	}
	if contends {
		l.c.contended.saw(l.key)
	}
	return nil, time.Duration(res[1]) * time.Millisecond, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters; the
// holder's lease is cancelled with ErrLockLost at its next renewal. It
// reports whether the lock was held, or returns a Redis error. A command
// sent twice (its reply lost) whose second run finds the lock gone
// reports it held: the first run is taken to have deleted it.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	ch := rdb.NewCounted(l.channel()) // its sends: see rdb.SendCounter
	n, err := l.ops.ForceUnlock(ctx, ch).Int()
	if err != nil {
		return false, fmt.Errorf("lockgen: force-unlocking %s: %w", l.key, err)
	}
	return n == 1 || ch.Sends() > 1, nil
}

// IsLocked reports whether anyone holds the lock, or returns a Redis error.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	return readValue(ctx, func() (bool, error) {
		n, err := l.c.rdb.Exists(ctx, l.key).Result()
		return n == 1, err
	})
}

// HoldCount returns how many holds the owner carried by ctx (a lease's
// Context, or a context derived from it) has on the lock: the number of
// Locks not yet unlocked of a reentrant lock (one side of a read-write
// lock counted apart), 1 for a simple lock, and 0 when that owner does not
// hold the lock or ctx carries no owner (without contacting Redis then).
// It costs one round trip and reads the hold as Redis has it now; like
// every call it honours ctx's cancellation, so to ask with the context of
// a lease that has ended, pass context.WithoutCancel(lease.Context()). It
// returns a Redis error when Redis fails.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	owner, ok := ctx.Value(ownerKey{}).(string)
	if !ok {
		return 0, nil
	}
	return readValue(ctx, func() (int, error) { return l.holdCount(ctx, owner) })
}

// IsHeldBy reports whether the owner carried by ctx holds the lock (see
// HoldCount), or returns a Redis error.
func (l *Lock) IsHeldBy(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// holdCount reads owner's holds of l.
func (l *Lock) holdCount(ctx context.Context, owner string) (int, error) {
	var (
		v   string
		err error
	)
	switch {
	case l.def.Kind == impl.Fair:
		// "<holds>[ <op>,...]" (see fair_acquire)
		v, err = l.c.rdb.HGet(ctx, l.key, owner).Result()
		v, _, _ = strings.Cut(v, " ")
	case l.mode == "r":
		v, err = l.c.rdb.HGet(ctx, l.key, "r:"+owner).Result()
	case l.mode == "w":
		var vs []any
		if vs, err = l.c.rdb.HMGet(ctx, l.key, "writer", "writes").Result(); err == nil && len(vs) == 2 && vs[0] == owner {
			v, _ = vs[1].(string)
		}
	default:
		var val string
		val, err = l.c.rdb.Get(ctx, l.key).Result()
		if h, ok := values.ParseHold(val); ok && h.Owner == owner {
			v = "1"
			if l.def.Kind != impl.Simple {
				v = strconv.Itoa(h.Holds)
			}
		}
	}
	switch {
	case errors.Is(err, redis.Nil) || (err == nil && v == ""):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("lockgen: reading %s: %w", l.key, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("lockgen: reading %s: not a hold count: %q", l.key, v)
	}
	return n, nil
}

// TTL returns the time left on the lock's lease, 0 when it is not held, or
// a Redis error.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	return readValue(ctx, func() (time.Duration, error) {
		d, err := l.c.rdb.PTTL(ctx, l.key).Result()
		if err != nil || d < 0 {
			return 0, err
		}
		return d, nil
	})
}

// Lease is one hold of a lock, returned by Lock and TryLock. Its Context
// is cancelled the moment the hold ends: with cause ErrLockLost when the
// lock was lost (key deleted, taken over, or not renewed before the lease
// ran out by the local clock), ErrClosed when the client was closed, and
// context.Canceled after Unlock. Do the guarded work under Context() so a
// lost lock stops it.
type Lease struct {
	hold
	lock  *Lock
	owner string
	token int64        // fenced locks: the hold's fencing token
	fast  bool         // taken by the acquire's fast path (see releaseHold)
	sent  atomic.Int32 // Unlock's sends of its release (see leaseOwner)
	taken time.Time
	young watchdog.Young // the watchdog's node of the hold while young, when this lease made it
	rel   releaseCtx     // Unlock's release context (it runs once: see giveUp)
}

// newLease makes the lease of owner's hold of l, taken at start, and
// registers it with the watchdog when l is renewed. When that fails (the
// client was closed meanwhile) it gives the hold back and returns the
// error.
func (l *Lock) newLease(parent context.Context, owner string, o acquireOptions, start time.Time) (*Lease, error) {
	return l.newLeaseFirst(parent, owner, o, start, 0)
}

// newLeaseFirst is newLease for a hold whose lease in Redis is first,
// shorter than o's, until its first renewal (a hand-off); 0 for o's.
func (l *Lock) newLeaseFirst(parent context.Context, owner string, o acquireOptions, start time.Time, first time.Duration) (*Lease, error) {
	le := &Lease{lock: l, owner: owner, taken: start}
	so := o
	if first > 0 && first < o.lease {
		so.lease = first
	}
	le.own.withOwner(owner) // as context.WithValue(parent, ownerKey{}, owner)
	le.start(parent, so, start, l.def.Renew, ErrLockLost)
	le.lease = o.lease
	if l.def.Renew {
		var err error
		if o.fresh { // a new owner: no hold to share
			err = l.c.wd.AddNew(l.renewal(le, first), (*leaseHold)(le), start)
		} else {
			err = l.c.wd.Add(le.held(), l.renewal(le, first), (*leaseHold)(le), start)
		}
		if err != nil {
			le.abandon(err)
			_, _ = l.release(parent, owner, o.lease)
			return nil, err
		}
	}
	return le, nil
}

// release runs the release script for one hold of owner, under a release
// context (see ReleaseTimeout); it returns the script's code. The replies,
// as the release scripts' headers state them:
//
//	reentrant_release reply: int
//	simple_release reply: int
//	fair_release reply: int
//	rw_release reply: int
func (l *Lock) release(ctx context.Context, owner string, lease time.Duration) (int, error) {
	rctx, cancel := releaseContext(ctx)
	defer cancel()
	n, _, err := l.releaseHold(rctx, owner, owner, lease, false)
	return n, err
}

// releaseHold is release for a hold taken by the acquire's fast path
// when fast: the script is sent with the lock's key and owner alone (and
// the lease, for a reentrant lock the watchdog does not renew), the
// common uncontended case (the registry's keys, the wake-up prefix, the
// publish command, the hand-off lease and the operation id travel only
// when a waiter is due the lock or holds are left: a second call then,
// rdb.HandOnDue). ctx is a release context already (releaseContext, or a
// Lease's rel). arg is what is sent as the owner: owner itself, or an
// rdb.SendCounter (an Unlock's leaseOwner); resent reports whether the
// call that answered was sent more than once.
func (l *Lock) releaseHold(ctx context.Context, owner string, arg any, lease time.Duration, fast bool) (n int, resent bool, err error) {
	if fast {
		// No lease for a simple lock (one hold) or a renewed one (the
		// watchdog renews the holds left: the script keeps the TTL).
		withLease := !l.def.Renew && l.def.Kind != impl.Simple
		cmd := l.ops.ReleaseFast(ctx, arg, lease, withLease)
		if rdb.IsConnError(cmd.Err()) {
			cmd = resolve(ctx, cmd, func() *redis.Cmd { return l.ops.ReleaseFast(ctx, arg, lease, withLease) })
		}
		n, err := cmd.Int()
		if err != nil || n != rdb.HandOnDue {
			return n, rdb.Resent(arg), err
		}
		rdb.HandedOn(arg)
	}
	op := l.c.newOp() // the same in every send of this release
	cmd := l.ops.Release(ctx, arg, lease, false, op)
	if rdb.IsConnError(cmd.Err()) {
		cmd = resolve(ctx, cmd, func() *redis.Cmd { return l.ops.Release(ctx, arg, lease, false, op) })
	}
	n, err = cmd.Int()
	return n, rdb.Resent(arg), err
}

// held identifies the lease's hold for the watchdog.
func (le *Lease) held() watchdog.Key {
	return watchdog.Key{Key: le.lock.key, Owner: le.lock.mode + le.owner}
}

// renewal says how the watchdog renews le's hold of l (first: see
// renewal.First).
func (l *Lock) renewal(le *Lease, first time.Duration) watchdog.Renewal {
	return watchdog.Renewal{Object: l.def.Name, Script: l.def.Scripts.Renew, Keys: l.ops.Keys(), ArgsOf: (*leaseHold)(le), Lease: le.lease, First: first}
}

// Context returns the lease's context: it carries the values of the
// context given to Lock and the owner, and ends when the hold ends (see
// Lease), not when the context given to Lock does, unless Lock was given
// WithParentCancel. Its Err and Done consult the local lease deadline
// (Deadline, moved forward by each renewal) when called, so a process
// resumed after a pause past its lease sees it ended before its next
// write. Pass it (or a context derived from it) to Lock to re-enter.
func (le *Lease) Context() context.Context {
	if le == nil {
		return endedContext(ErrNotHeld)
	}
	return le.ctx
}

// IsHeld reports whether this hold is still live: its context has not
// ended (see Context) and Redis still has its owner holding the lock (one
// round trip). It returns a Redis error when Redis fails.
func (le *Lease) IsHeld(ctx context.Context) (bool, error) {
	if le == nil || le.ctx.Err() != nil {
		return false, nil
	}
	n, err := le.lock.holdCount(ctx, le.owner)
	return n > 0, err
}

// Lease returns the lease this hold was taken with: the spec's, or the
// one given with WithLease.
func (le *Lease) Lease() time.Duration { return le.lease }

// Lock returns the lock this lease holds.
func (le *Lease) Lock() *Lock { return le.lock }

// Token returns the fencing token of a fenced lock's hold: larger than
// the token of every earlier hold of the lock, by any owner, so that
// storage can reject a write carrying a smaller token than one it has
// seen (see "Fenced locks" in docs/design.md). Re-entries share their
// hold's token. It is 0 for the other kinds.
func (le *Lease) Token() int64 { return le.token }

// Unlock gives up this hold. The lock is released, and one waiter woken,
// when its last hold is given up. It completes although ctx was cancelled:
// it keeps ctx's values only, and gives up after ReleaseTimeout.
//
// It returns ErrLockLost when the lease was known to be lost (its context
// ended with ErrLockLost, also by its local deadline; the hold is released
// all the same if Redis still has it), also when the release reached
// Redis after the lease's local deadline and found no hold (a stall), ErrNotHeld when this lease was
// already unlocked or its owner no longer holds the lock, or ErrNotReleased
// wrapping the Redis error when Redis could not be reached: the hold is
// no longer renewed then, and the lock expires at the end of its lease.
func (le *Lease) Unlock(ctx context.Context) error {
	if le == nil { // a failed TryLock's
		return ErrNotHeld
	}
	lost, ok := le.giveUp()
	if !ok {
		return ErrNotHeld
	}
	l := le.lock
	if l.def.Renew {
		l.c.wd.Remove(le.held(), (*leaseHold)(le))
	}
	n, resent, err := l.releaseHold(le.rel.of(ctx), le.owner, (*leaseOwner)(le), le.lease, le.fast)
	if len(l.c.observers) > 0 {
		l.c.observe(ctx, Event{Kind: EventReleased, Object: l.def.Name, Duration: time.Since(le.taken)})
	}
	if n < 0 && resent {
		n = 0 // an earlier run of this call released it (see rdb.SendCounter)
	}
	l.c.releaseFoundNothing(n, err, lost)
	return releaseResult(l.key, lost || (n < 0 && err == nil && le.ranOut()), n, err, ErrLockLost, ErrNotHeld)
}

func (c *Client) checkOpen() error {
	select {
	case <-c.hub.Closed():
		return ErrClosed
	default:
		return nil
	}
}
