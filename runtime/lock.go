package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
)

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
	def *LockDef
	key string
	// mode is the side of a readwrite lock ("r" or "w"), passed to its
	// scripts as their last argument; "" for the other kinds.
	mode string
}

// Key returns the Redis key of the lock.
func (l *Lock) Key() string { return l.key }

// Name returns the lock's name in the spec.
func (l *Lock) Name() string { return l.def.Name }

func (l *Lock) channel() string { return keys.Sub(l.key, "ch") }

// Lock acquires the lock, waiting while another owner holds it: until the
// context's deadline when it has one, otherwise for the spec's default
// wait. Waiting costs no Redis traffic: the waiter is woken by the
// release's pub/sub message, with the holder's remaining lease as a
// fallback timer.
//
// It returns ErrNotObtained when the wait ran out (also matching the
// context's error when the context ended it), ErrNotReentrant when a
// simple lock is already held by the owner in ctx, ErrUpgrade when the
// write side of an RWLock is asked for by an owner holding its read side,
// ErrClosed after the client was closed, or a Redis error.
func (l *Lock) Lock(ctx context.Context) (*Lease, error) {
	return l.acquire(ctx, defaultWait(ctx, l.def.Wait))
}

// TryLock acquires the lock, waiting at most wait (0: try once) and no
// longer than the context allows. It returns the errors Lock returns, and
// ErrInvalidArgument for a negative wait.
func (l *Lock) TryLock(ctx context.Context, wait time.Duration) (*Lease, error) {
	if err := checkWait(wait); err != nil {
		return nil, err
	}
	return l.acquire(ctx, wait)
}

// acquire takes the lock; wait < 0 means as long as ctx allows.
func (l *Lock) acquire(ctx context.Context, wait time.Duration) (*Lease, error) {
	if l.def.Kind == Fair {
		return l.acquireFair(ctx, wait)
	}
	owner := l.c.ownerFrom(ctx)
	le, ttl, err := l.attempt(ctx, owner)
	if le != nil || err != nil {
		return le, err
	}
	if wait == 0 {
		return nil, ErrNotObtained
	}
	err = l.c.waitFor(ctx, wait, l.channel(), false, func(*subscription, *waiter) (bool, time.Duration, error) {
		var err error
		le, ttl, err = l.attempt(ctx, owner)
		return le != nil, fallback(ttl), err
	})
	if err != nil {
		return nil, err
	}
	return le, nil
}

// attempt runs the acquire script once. It returns a lease when the lock
// was taken, or the holder's remaining TTL.
func (l *Lock) attempt(ctx context.Context, owner string) (*Lease, time.Duration, error) {
	if err := l.c.checkOpen(); err != nil {
		return nil, 0, err
	}
	start := time.Now()
	// The attempt is not cut short by ctx: a script that ran in Redis
	// while its reply was abandoned would hold the lock for a whole lease
	// with nobody to release it. go-redis' read timeout bounds it.
	res, err := l.c.eval(context.WithoutCancel(ctx), l.def.Scripts.Acquire, l.scriptKeys(), l.args(l.def.Lease.Milliseconds(), owner)...).Int64Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("lockgen: acquiring %s: %w", l.key, err)
	}
	if len(res) != 2 && len(res) != 3 {
		return nil, 0, fmt.Errorf("lockgen: acquiring %s: unexpected reply %v", l.key, res)
	}
	switch res[0] {
	case 1:
		le, err := l.newLease(ctx, owner, start)
		if le != nil && len(res) == 3 {
			le.token = res[2]
		}
		return le, 0, err
	case -1:
		return nil, 0, ErrNotReentrant
	case -2:
		return nil, 0, ErrUpgrade
	}
	return nil, time.Duration(res[1]) * time.Millisecond, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters; the
// holder's lease is cancelled with ErrLockLost at its next renewal. It
// reports whether the lock was held, or returns a Redis error.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	n, err := l.c.eval(ctx, l.def.Scripts.ForceUnlock, l.scriptKeys(), l.channel()).Int()
	if err != nil {
		return false, fmt.Errorf("lockgen: force-unlocking %s: %w", l.key, err)
	}
	return n == 1, nil
}

// IsLocked reports whether anyone holds the lock, or returns a Redis error.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	n, err := l.c.rdb.Exists(ctx, l.key).Result()
	return n == 1, err
}

// TTL returns the time left on the lock's lease, 0 when it is not held, or
// a Redis error.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	d, err := l.c.rdb.PTTL(ctx, l.key).Result()
	if err != nil || d < 0 {
		return 0, err
	}
	return d, nil
}

// Lease is one hold of a lock, returned by Lock and TryLock. Its Context
// is cancelled the moment the hold ends: with cause ErrLockLost when the
// lock was lost (key deleted, taken over, or not renewable before the
// lease ran out), ErrClosed when the client was closed, and
// context.Canceled after Unlock. Do the guarded work under Context() so a
// lost lock stops it.
type Lease struct {
	hold
	lock  *Lock
	owner string
	token int64 // fenced locks: the hold's fencing token
}

// hold is what a lease and a permit share: the context that ends with the
// hold, and giving the hold up once.
type hold struct {
	ctx context.Context
	end context.CancelCauseFunc

	mu   sync.Mutex
	gone bool // given up
}

// cancel ends the hold's context with cause; the watchdog calls it.
func (h *hold) cancel(cause error) { h.end(cause) }

// giveUp marks the hold given up and ends its context. It reports whether
// the hold was known to be lost, and ok false when it had been given up
// before.
func (h *hold) giveUp() (lost, ok bool) {
	h.mu.Lock()
	if h.gone {
		h.mu.Unlock()
		return false, false
	}
	h.gone = true
	h.mu.Unlock()
	lost = errors.Is(context.Cause(h.ctx), ErrLockLost)
	h.end(nil)
	return lost, true
}

func (l *Lock) newLease(parent context.Context, owner string, start time.Time) (*Lease, error) {
	le := &Lease{lock: l, owner: owner}
	ctx := context.WithValue(parent, ownerKey{}, owner)
	if l.def.Renew {
		le.ctx, le.end = context.WithCancelCause(ctx)
		if err := l.c.wd.add(le.held(), l.renewal(owner), le, start); err != nil {
			le.end(err)
			return nil, err
		}
		return le, nil
	}
	le.ctx, le.end = fixedLeaseContext(ctx, start.Add(l.def.Lease), ErrLockLost)
	return le, nil
}

// fixedLeaseContext returns the context of a hold nobody renews: it ends
// with cause at deadline, when the hold runs out, or when its cancel func
// is called (the cause given to that is ignored: context.Canceled).
func fixedLeaseContext(parent context.Context, deadline time.Time, cause error) (context.Context, context.CancelCauseFunc) {
	ctx, stop := context.WithDeadlineCause(parent, deadline, cause)
	return ctx, func(error) { stop() }
}

// held identifies the lease's hold for the watchdog.
func (le *Lease) held() heldKey { return heldKey{le.lock.key, le.lock.mode + le.owner} }

// renewal says how the watchdog renews owner's hold of l.
func (l *Lock) renewal(owner string) renewal {
	return renewal{
		Script:   l.def.Scripts.Renew,
		Keys:     l.scriptKeys(),
		Args:     l.args(l.def.Lease.Milliseconds(), owner),
		Lease:    l.def.Lease,
		Interval: l.def.Lease / 3,
	}
}

// Context returns the lease's context: the context given to Lock, carrying
// the owner, cancelled when the hold ends (see Lease). Pass it (or a
// context derived from it) to Lock to re-enter.
func (le *Lease) Context() context.Context { return le.ctx }

// Lock returns the lock this lease holds.
func (le *Lease) Lock() *Lock { return le.lock }

// Token returns the fencing token of a fenced lock's hold: larger than
// the token of every earlier hold of the lock, by any owner, so that
// storage can reject a write carrying a smaller token than one it has
// seen (see "Fenced locks" in the package doc). Re-entries share their
// hold's token. It is 0 for the other kinds.
func (le *Lease) Token() int64 { return le.token }

// Unlock gives up this hold. The lock is released, and one waiter woken,
// when its last hold is given up. It returns ErrNotHeld when this lease
// was already unlocked or its owner no longer holds the lock, ErrLockLost
// when the lease was known to be lost, or a Redis error (the lock then
// expires after its lease).
func (le *Lease) Unlock(ctx context.Context) error {
	lost, ok := le.giveUp()
	if !ok {
		return ErrNotHeld
	}
	l := le.lock
	if l.def.Renew {
		l.c.wd.remove(le.held(), le)
	}
	n, err := l.c.eval(ctx, l.def.Scripts.Release, l.scriptKeys(), l.args(le.owner, l.def.Lease.Milliseconds(), l.channel())...).Int()
	switch {
	case err != nil:
		return fmt.Errorf("lockgen: releasing %s: %w", l.key, err)
	case n < 0 && lost:
		return ErrLockLost
	case n < 0:
		return ErrNotHeld
	}
	return nil
}

// scriptKeys returns the KEYS of the lock's scripts: the lock's key, then
// the keys of its kind (all in the lock's hash slot).
func (l *Lock) scriptKeys() []string {
	switch l.def.Kind {
	case Fair:
		return l.fairKeys()
	case ReadWrite:
		return l.rwKeys()
	case Fenced:
		return l.fencedKeys()
	}
	return []string{l.key}
}

// args returns the ARGV of one of the lock's scripts: args, then the side
// of a readwrite lock.
func (l *Lock) args(args ...any) []any {
	if l.mode != "" {
		args = append(args, l.mode)
	}
	return args
}

func (c *Client) checkOpen() error {
	select {
	case <-c.hub.closedCh():
		return ErrClosed
	default:
		return nil
	}
}
