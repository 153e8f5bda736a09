package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

func init() {
	impl.NewRWLock = func(c any, def *impl.LockDef, key string) any { return c.(*Client).newRWLock(def, key) }
}

// ErrUpgrade: the write side of a read-write lock was requested by an
// owner holding its read side. Upgrading is refused rather than waited
// for: two readers upgrading at once would wait for each other forever.
// Release the read side first, or take the write side from the start
// (the writer may then take the read side and release the write side: a
// downgrade).
var ErrUpgrade = errors.New("lockgen: a read lock cannot be upgraded to a write lock")

// RWLock is a read-write lock: a generated constructor's result for a
// lock of kind readwrite. Its read side is shared by any number of
// owners; its write side excludes every other owner, readers and writers.
// Both sides are Locks: Read().Lock(ctx) and Write().Lock(ctx) return
// leases that the watchdog renews and whose contexts are cancelled when
// the hold is lost, like any lock's.
//
// Both sides are reentrant. The owner holding the write side may also
// take the read side (Read().Lock with the write lease's context), and
// Lease.Downgrade turns a write hold into a read hold without a moment
// when another writer could get in. An owner holding the read side that
// asks for the write side gets ErrUpgrade.
//
// Every hold has a lease of its own, kept in Redis per owner and side:
// a reader that dies loses its share when its own lease runs out, without
// shortening the other readers'. Waiters are served in arrival order: a
// release hands the lock to the writer at the head of the queue alone, or
// to every reader up to the first waiting writer; a new reader queues
// behind a waiting writer (see "Read-write locks" in docs/design.md).
type RWLock struct {
	read, write Lock
}

// RWLock returns the read-write lock with the given definition (of kind
// ReadWrite, emitted by lockgen) and key. It does not contact Redis.
// Both sides are made in one allocation, and share their prepared keys
// (the read side's slices point into the write side's arrays, which
// live as long as the RWLock).
func (c *Client) newRWLock(def *impl.LockDef, key string) *RWLock {
	rw := &RWLock{write: Lock{c: c, def: def, key: key, mode: "w"}}
	rw.write.ops.Prepare(&c.conn, def, key, "w", rw.write.registryTTL(), c.classicWake(key))
	rw.read = rw.write
	rw.read.mode = "r"
	rw.read.ops.Side("r")
	return rw
}

// Read returns the shared side of the lock.
func (rw *RWLock) Read() *Lock { return &rw.read }

// Write returns the exclusive side of the lock.
func (rw *RWLock) Write() *Lock { return &rw.write }

// Key returns the Redis key of the lock.
func (rw *RWLock) Key() string { return rw.write.key }

// Name returns the lock's name in the spec.
func (rw *RWLock) Name() string { return rw.write.def.Name }

// IsLocked reports whether anyone holds either side, or returns a Redis
// error.
func (rw *RWLock) IsLocked(ctx context.Context) (bool, error) { return rw.write.IsLocked(ctx) }

// ForceUnlock deletes every hold of both sides and wakes every waiter
// (they are handed the lock again in arrival order); the
// holders' leases are cancelled with ErrLockLost at their next renewal. It
// reports whether the lock was held, or returns a Redis error.
func (rw *RWLock) ForceUnlock(ctx context.Context) (bool, error) {
	return rw.write.ForceUnlock(ctx)
}

// Downgrade turns a write lease of an RWLock into a read lease of the
// same owner: it takes the read side (which the writer may), then gives up
// this write hold (two round trips), so no other writer can get in
// between. The read lease's context derives from ctx, not from the write
// lease's context, which ends. Other holds of the write side by the same
// owner (re-entries) stay held.
//
// It returns ErrInvalidArgument when le is not a write lease of an RWLock,
// ErrNotHeld or ErrLockLost when le no longer holds the write side (then
// no read hold is left either), ErrClosed, or a Redis error.
func (le *Lease) Downgrade(ctx context.Context) (*Lease, error) {
	l := le.lock
	if l.def.Kind != impl.ReadWrite || l.mode != "w" {
		return nil, fmt.Errorf("%w: Downgrade of a lease that is not a write lease of a read-write lock", ErrInvalidArgument)
	}
	read := l.c.lock(l.def, l.key, "r")
	r, _, err := read.attempt(context.WithValue(ctx, ownerKey{}, le.owner), le.owner, acquireOptions{lease: le.lease}, 0, false, time.Now())
	if err != nil {
		return nil, err
	}
	if r == nil { // another owner writes: this one lost the write side
		if errors.Is(context.Cause(le.ctx), ErrLockLost) {
			return nil, ErrLockLost
		}
		return nil, ErrNotHeld
	}
	if err := le.Unlock(ctx); err != nil {
		// Not a downgrade: someone may have written in between.
		_ = r.Unlock(ctx)
		return nil, err
	}
	return r, nil
}
