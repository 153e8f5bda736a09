package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

// MultiLock is several locks taken together: all of them or none. Make one
// with NewMultiLock from generated locks of any kinds, keys and clients.
//
// Its locks are taken in one fixed order, by key, so two multi-locks over
// overlapping sets can never deadlock each other, whatever order their
// locks were given in. When every lock is reentrant or simple, all are on
// one client, and their keys share a hash slot (or the client is a single
// node, where any keys do), one script takes them all or none atomically
// and one script releases them: one round trip each. Otherwise the locks
// are taken one by one in key order, each waiting as its own Lock does,
// and those taken are released when a later one cannot be.
type MultiLock struct {
	locks  []*Lock       // sorted by key and side, each once
	atomic bool          // one script takes them all
	wait   time.Duration // the longest default wait of the locks
	err    error         // why the multi-lock cannot be taken, if it cannot
}

// NewMultiLock returns a multi-lock over locks. A lock given twice (the
// same key, and for a read-write lock the same side) is taken once. It does
// not contact Redis. A multi-lock with no locks, or with a nil one, fails
// every Lock with ErrInvalidArgument.
func NewMultiLock(locks ...*Lock) *MultiLock {
	m := &MultiLock{}
	if len(locks) == 0 {
		m.err = fmt.Errorf("%w: a multi-lock needs at least one lock", ErrInvalidArgument)
		return m
	}
	for _, l := range locks {
		if l == nil {
			m.err = fmt.Errorf("%w: nil lock in a multi-lock", ErrInvalidArgument)
			return m
		}
		m.wait = max(m.wait, l.def.Wait)
	}
	m.locks = slices.Clone(locks)
	slices.SortStableFunc(m.locks, func(a, b *Lock) int {
		return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.mode, b.mode))
	})
	m.locks = slices.CompactFunc(m.locks, func(a, b *Lock) bool { return a.key == b.key && a.mode == b.mode })
	m.atomic = atomicSet(m.locks)
	return m
}

// atomicSet reports whether one script can take all of locks: there are
// several, of kinds with multi scripts, on one client, and on one slot or
// a single node.
func atomicSet(locks []*Lock) bool {
	if len(locks) < 2 {
		return false
	}
	first := locks[0]
	for _, l := range locks {
		s := l.def.Scripts
		if l.c != first.c || l.mode != "" || (l.def.Kind != impl.Reentrant && l.def.Kind != impl.Simple) ||
			s.MultiAcquire == nil || s.MultiRelease == nil ||
			s.MultiAcquire.SHA1 != first.def.Scripts.MultiAcquire.SHA1 ||
			s.MultiRelease.SHA1 != first.def.Scripts.MultiRelease.SHA1 {
			return false
		}
	}
	if _, single := first.c.rdb.(*redis.Client); single {
		return true
	}
	slot := keys.Slot(first.key)
	for _, l := range locks {
		if keys.Slot(l.key) != slot {
			return false
		}
	}
	return true
}

// Locks returns the multi-lock's locks in the order they are taken.
func (m *MultiLock) Locks() []*Lock { return slices.Clone(m.locks) }

// Atomic reports whether one script takes and releases all the locks.
func (m *MultiLock) Atomic() bool { return m.atomic }

// Lock takes every lock, waiting while any is held by another owner: until
// the context's deadline when it has one, otherwise for the longest default
// wait of the locks. On failure no lock is left taken.
//
// It returns the errors a Lock's Lock returns (ErrNotObtained, also
// matching the context's error when the context ended the wait;
// ErrNotReentrant; ErrClosed; a Redis error), wrapped with the key of the
// lock that could not be taken, and ErrInvalidArgument for a multi-lock
// without locks. Options apply to every lock (WithLease: the same lease
// for all); the context bounds the wait, not the hold, as with Lock.
func (m *MultiLock) Lock(ctx context.Context, opts ...AcquireOption) (*MultiLease, error) {
	return m.acquire(ctx, defaultWait(ctx, m.wait), opts)
}

// TryLock takes every lock, waiting at most wait in all (0: try once) and
// no longer than the context allows. It returns the errors Lock returns,
// and ErrInvalidArgument for a negative wait.
func (m *MultiLock) TryLock(ctx context.Context, wait time.Duration, opts ...AcquireOption) (*MultiLease, error) {
	if err := checkWait(wait); err != nil {
		return nil, err
	}
	return m.acquire(ctx, wait, opts)
}

func (m *MultiLock) acquire(ctx context.Context, wait time.Duration, opts []AcquireOption) (*MultiLease, error) {
	if m.err != nil {
		return nil, m.err
	}
	os := make([]acquireOptions, len(m.locks))
	for i, l := range m.locks {
		o, err := acquireOpts(l.def.Lease, opts)
		if err != nil {
			return nil, err
		}
		os[i] = o
	}
	if m.atomic {
		return m.acquireAtomic(ctx, wait, os)
	}
	return m.acquireInOrder(ctx, wait, os)
}

// acquireInOrder takes the locks one by one in key order. Waiting for a
// lock while holding the ones before it cannot deadlock: every multi-lock
// waits in the same order.
func (m *MultiLock) acquireInOrder(ctx context.Context, wait time.Duration, os []acquireOptions) (*MultiLease, error) {
	owner := m.locks[0].c.ownerFrom(ctx)
	octx := context.WithValue(ctx, ownerKey{}, owner)
	deadline := time.Now().Add(wait)
	leases := make([]*Lease, 0, len(m.locks))
	for i, l := range m.locks {
		w := wait
		if wait > 0 {
			w = max(0, time.Until(deadline))
		}
		le, err := l.acquire(octx, w, os[i])
		if err != nil {
			releaseInOrder(context.WithoutCancel(ctx), leases)
			return nil, fmt.Errorf("lockgen: multi-lock blocked at %s: %w", l.key, err)
		}
		leases = append(leases, le)
	}
	return newMultiLease(m, octx, os[0].parentCancel, leases), nil
}

// releaseInOrder unlocks leases in reverse order and returns their errors.
func releaseInOrder(ctx context.Context, leases []*Lease) error {
	var errs []error
	for i := len(leases) - 1; i >= 0; i-- {
		if err := leases[i].Unlock(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lockgen: releasing %s: %w", leases[i].lock.key, err))
		}
	}
	return errors.Join(errs...)
}

// acquireAtomic runs the multi-acquire script until it takes every lock,
// waiting between attempts (in the one wait loop, waitFor) on the channel
// of the lock that blocked it; when another lock blocks it, it waits on
// that one's channel instead.
func (m *MultiLock) acquireAtomic(ctx context.Context, wait time.Duration, os []acquireOptions) (ml *MultiLease, err error) {
	c := m.locks[0].c
	owner := c.ownerFrom(ctx)
	// The longest registration TTL of the locks (waitTTL: a release
	// passes over a waiter whose client went away where it can tell, so
	// that an entry lasts LiveRegistryTTL there). The waiter's client
	// keeps its entry "<owner> m" at the lock that blocks it registered,
	// in its group of waiters there (refresher), as a Lock's: a waiting
	// multi-lock costs nothing per second of its own.
	reg := time.Duration(0)
	for _, l := range m.locks {
		if wait != 0 {
			reg = max(reg, l.waitTTL())
		}
	}
	tried := time.Now() // (waitObject.tried)
	ml, blocked, ttl, err := m.attempt(ctx, owner, os, reg, 0)
	if ml != nil || failFast(err, wait) {
		return ml, err
	}
	if wait == 0 {
		return nil, m.notObtained(blocked, ErrNotObtained)
	}
	// r: the entry at the lock that blocks it (nil until an attempt
	// registered it: the first failed transiently, and the wait rides
	// it out).
	var r *registration
	sleep := retryBackoff(0)
	if err == nil {
		r = m.locks[blocked].registration(owner+" m", reg, ttl)
		sleep = c.waitSleep(r)
	}
	deadline := time.Now().Add(wait)
	for {
		w := wait
		if wait > 0 {
			if w = time.Until(deadline); w <= 0 {
				return nil, m.notObtained(blocked, waitError(ctx, context.DeadlineExceeded))
			}
		}
		at, moved := blocked, false
		var tryErr error
		obj := waitObject{name: m.locks[at].def.Name, key: m.locks[at].key, reg: r, tried: tried}
		err = c.waitFor(ctx, w, obj, m.locks[at].waitChannel(), owner, r != nil, sleep, func(string) (bool, time.Duration, error) {
			var b int
			tried = time.Now()
			ml, b, ttl, tryErr = m.attempt(ctx, owner, os, reg, at+1)
			switch {
			case ml != nil || tryErr != nil:
				return ml != nil, 0, tryErr
			case b != at || r == nil:
				// Another lock blocks it now (and registered it there),
				// or it is registered now: wait on that lock's channel,
				// its entry kept by the client.
				blocked, moved = b, true
				return false, 0, errMoved
			}
			return false, sleep, nil
		})
		switch {
		case moved:
			r = m.locks[blocked].registration(owner+" m", reg, ttl)
			sleep = c.waitSleep(r)
		case err == nil:
			return ml, nil
		case err == tryErr:
			m.leave(ctx, owner, blocked, os[blocked].lease)
			return nil, err
		default:
			m.leave(ctx, owner, blocked, os[blocked].lease)
			return nil, m.notObtained(blocked, err)
		}
	}
}

// leave takes owner, an atomic multi-lock's waiter that gives up, out of
// the registry of lock i, where its last attempt registered it as
// "<owner> m", so that a release does not wake it in vain (and leave the
// waiters behind it to their next refresh). Best effort, like a Lock's.
func (m *MultiLock) leave(ctx context.Context, owner string, i int, lease time.Duration) {
	if i < 0 || i >= len(m.locks) {
		return
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	member := owner + " m"
	_ = m.locks[i].ops.Release(ctx, member, lease, true, m.locks[0].c.newOp()).Err()
}

// errMoved ends a multi-lock's wait on one lock's channel when another
// lock blocks it.
var errMoved = errors.New("lockgen: blocked at another lock")

func (m *MultiLock) notObtained(blocked int, err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("lockgen: multi-lock blocked at %s: %w", m.locks[blocked].key, err)
}

// attempt runs the multi-acquire script once, registering owner (for
// reg; 0: not) as a waiter of the lock that blocks it; registered > 0 when
// owner is registered already, at that lock (1-based): then, while that
// lock is held, the script only refreshes owner's entry. It returns a lease when every lock was taken, or
// the index of the lock that is held by another owner and its remaining
// TTL. Like a lock's attempt, it takes nothing when ctx has ended, and
// gives back what it took when ctx ended meanwhile.
func (m *MultiLock) attempt(ctx context.Context, owner string, os []acquireOptions, reg time.Duration, registered int) (*MultiLease, int, time.Duration, error) {
	c := m.locks[0].c
	if err := c.checkOpen(); err != nil {
		return nil, 0, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, waitError(ctx, err)
	}
	flag := "0"
	if registered > 0 {
		flag = "2:" + strconv.Itoa(registered)
	}
	if _, carried := ctx.Value(ownerKey{}).(string); !carried { // a new owner: see multi_acquire
		flag = "n" + flag
	}
	ops := multiOps(m.locks, os)
	ks := ops.Keys()
	start := time.Now()
	// Not cut short by ctx, like Lock's attempt: an abandoned reply would
	// leave the locks held for a lease with nobody to release them.
	// multi_acquire reply: {int, int} | {int, int, int}
	res, err := ops.Acquire(context.WithoutCancel(ctx), owner, reg, flag).Int64Slice()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("lockgen: acquiring %s: %w", strings.Join(ks, ", "), err)
	}
	if len(res) < 2 || (res[0] != 1 && (len(res) != 3 || res[2] < 1 || int(res[2]) > len(m.locks))) {
		return nil, 0, 0, fmt.Errorf("lockgen: acquiring %s: unexpected reply %v", strings.Join(ks, ", "), res)
	}
	switch res[0] {
	case 1:
		octx := context.WithValue(ctx, ownerKey{}, owner)
		leases := make([]*Lease, 0, len(m.locks))
		for i, l := range m.locks {
			le, err := l.newLease(octx, owner, os[i], start)
			if err != nil { // the client was closed meanwhile
				for _, le := range leases {
					le.abandon(err) // never handed out
					if le.lock.def.Renew {
						le.lock.c.wd.Remove(le.held(), (*leaseHold)(le))
					}
				}
				_, _ = releaseAll(ctx, owner, m.locks, os)
				return nil, 0, 0, err
			}
			leases = append(leases, le)
		}
		ml := newMultiLease(m, octx, os[0].parentCancel, leases)
		if err := ctx.Err(); err != nil {
			// Cancelled while the script ran: give the locks back.
			_ = ml.Unlock(ctx)
			return nil, 0, 0, waitError(ctx, err)
		}
		return ml, 0, 0, nil
	case -1:
		return nil, 0, 0, fmt.Errorf("lockgen: multi-lock blocked at %s: %w", m.locks[res[2]-1].key, ErrNotReentrant)
	}
	return nil, int(res[2] - 1), time.Duration(res[1]) * time.Millisecond, nil
}

// MultiLease is one hold of every lock of a MultiLock. Its Context is
// cancelled when the hold of any of its locks ends, with that lock's cause
// (ErrLockLost when it was lost, ErrClosed when its client was closed), and
// with context.Canceled after Unlock. Locking a lock or a multi-lock with
// it (or a context derived from it) re-enters as its owner.
type MultiLease struct {
	m      *MultiLock
	leases []*Lease
	ctx    *multiContext

	mu       sync.Mutex
	unlocked bool
}

func newMultiLease(m *MultiLock, parent context.Context, parentCancel bool, leases []*Lease) *MultiLease {
	ml := &MultiLease{m: m, leases: leases}
	if !parentCancel {
		parent = context.WithoutCancel(parent)
	}
	ml.ctx = &multiContext{leases: leases}
	ml.ctx.Context, ml.ctx.end = context.WithCancelCause(parent)
	for _, le := range leases {
		context.AfterFunc(le.ctx, func() { ml.ctx.end(context.Cause(le.ctx)) })
	}
	return ml
}

// multiContext is a multi-lease's context: like a lease's, its Err, Done
// and Value check its leases' local deadlines when called.
type multiContext struct {
	context.Context
	end    context.CancelCauseFunc
	leases []*Lease
}

func (c *multiContext) check() {
	if c.Context.Err() != nil {
		return
	}
	for _, le := range c.leases {
		if le.ctx.Err() != nil {
			c.end(context.Cause(le.ctx))
			return
		}
	}
}

func (c *multiContext) Err() error            { c.check(); return c.Context.Err() }
func (c *multiContext) Done() <-chan struct{} { c.check(); return c.Context.Done() }
func (c *multiContext) Value(key any) any     { c.check(); return c.Context.Value(key) }
func (c *multiContext) Deadline() (time.Time, bool) {
	d, ok := c.Context.Deadline()
	for _, le := range c.leases {
		if ld, _ := le.ctx.Deadline(); !ok || ld.Before(d) {
			d, ok = ld, true
		}
	}
	return d, ok
}

// Context returns the multi-lease's context: it carries the values of the
// context given to Lock and the owner, and ends when any of the holds ends
// (not when the context given to Lock does, unless WithParentCancel).
func (ml *MultiLease) Context() context.Context {
	if ml == nil {
		return endedContext(ErrNotHeld)
	}
	return ml.ctx
}

// Leases returns the lease of each lock, in the multi-lock's order (for
// example to read fenced locks' tokens). Unlock the multi-lease, not
// these.
func (ml *MultiLease) Leases() []*Lease { return slices.Clone(ml.leases) }

// Unlock gives up the hold of every lock: in one script when the
// multi-lock is atomic, otherwise one by one in reverse order. Every lock
// is released even when some fail. It returns ErrNotHeld when the
// multi-lease was already unlocked or an owner no longer holds one of the
// locks, ErrLockLost when one of the holds was known to be lost, or a
// Redis error matching ErrNotReleased (the locks not released then expire
// after their leases), wrapped with the key concerned; several errors are
// joined. Like Lease.Unlock, it completes although ctx was cancelled.
func (ml *MultiLease) Unlock(ctx context.Context) error {
	if ml == nil { // a failed TryLock's
		return ErrNotHeld
	}
	ml.mu.Lock()
	if ml.unlocked {
		ml.mu.Unlock()
		return ErrNotHeld
	}
	ml.unlocked = true
	ml.mu.Unlock()
	ml.ctx.end(nil)
	if !ml.m.atomic || len(ml.leases) == 0 {
		return releaseInOrder(ctx, ml.leases)
	}
	var (
		owner  = ml.leases[0].owner
		locks  []*Lock
		leases []acquireOptions
		lost   []bool
		errs   []error
	)
	for _, le := range ml.leases {
		wasLost, ok := le.giveUp()
		if !ok {
			errs = append(errs, fmt.Errorf("lockgen: releasing %s: %w", le.lock.key, ErrNotHeld))
			continue
		}
		if le.lock.def.Renew {
			le.lock.c.wd.Remove(le.held(), (*leaseHold)(le))
		}
		lost = append(lost, wasLost)
		locks = append(locks, le.lock)
		leases = append(leases, acquireOptions{lease: le.lease})
	}
	if len(locks) == 0 {
		return errors.Join(errs...)
	}
	codes, err := releaseAll(ctx, owner, locks, leases)
	for i, l := range locks {
		if lost[i] {
			errs = append(errs, fmt.Errorf("lockgen: releasing %s: %w", l.key, ErrLockLost))
		}
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i, code := range codes {
		if code < 0 && !lost[i] {
			errs = append(errs, fmt.Errorf("lockgen: releasing %s: %w", locks[i].key, ErrNotHeld))
		}
	}
	return errors.Join(errs...)
}

// multiOps returns the script operations of locks held with os' leases
// (runtime/internal/rdb).
func multiOps(locks []*Lock, os []acquireOptions) rdb.MultiLock {
	m := rdb.MultiLock{Locks: make([]*rdb.Lock, len(locks)), Leases: make([]time.Duration, len(locks))}
	for i, l := range locks {
		m.Locks[i], m.Leases[i] = &l.ops, os[i].lease
	}
	return m
}

// releaseAll runs the multi-release script for owner's holds of locks
// (os: each hold's lease), under a release context (see ReleaseTimeout),
// and returns its code per lock.
func releaseAll(ctx context.Context, owner string, locks []*Lock, os []acquireOptions) ([]int64, error) {
	if len(locks) == 0 {
		return nil, nil
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	ops := multiOps(locks, os)
	ks := ops.Keys()
	// multi_release reply: {int...}
	codes, err := ops.Release(ctx, owner).Int64Slice()
	if err != nil {
		return nil, notReleased(strings.Join(ks, ", "), err)
	}
	if len(codes) != len(locks) {
		return nil, fmt.Errorf("lockgen: releasing %s: unexpected reply %v", strings.Join(ks, ", "), codes)
	}
	return codes, nil
}
