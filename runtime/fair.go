package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
)

// DefaultWaiterTTL is how long a waiter of a fair lock keeps its place in
// the queue without refreshing it, unless its LockDef says otherwise. A
// live waiter refreshes it every third of it; a waiter that died is
// evicted at most this long after its last refresh.
const DefaultWaiterTTL = 5 * time.Second

// A fair lock is a reentrant Lock whose waiters get it in arrival order.
// Its scripts keep, next to the lock hash, a wait queue (the key with the
// suffix ":queue", a list of owners) and each waiter's deadline (":waiters",
// a zset scored by the Redis server's clock). A waiter queues itself,
// refreshes its deadline every WaiterTTL/3 while it waits, and sleeps on a
// channel of its own (the lock's channel, ":", its owner id): a release
// wakes the first live waiter only. Whoever runs a script of the lock next
// evicts the waiters whose deadline passed; a waiter that gives up leaves
// the queue at once (best effort: otherwise it is evicted at its deadline).

// fairKeys returns the keys of a fair lock's scripts: the lock, its queue
// and its waiters' deadlines.
func (l *Lock) fairKeys() []string {
	return []string{l.key, keys.Sub(l.key, "queue"), keys.Sub(l.key, "waiters")}
}

// waiterTTL is how long a queued waiter of l keeps its place unrefreshed.
func (l *Lock) waiterTTL() time.Duration {
	if l.def.WaiterTTL > 0 {
		return l.def.WaiterTTL
	}
	return DefaultWaiterTTL
}

// acquireFair takes a fair lock; wait < 0 means as long as ctx allows.
// The first attempt does not queue: a free lock nobody waits for, or a
// re-entry, costs one round trip, and a TryLock that does not wait leaves
// no trace. A waiter subscribes to its own channel before it queues, so
// the release that makes it first always reaches it.
func (l *Lock) acquireFair(ctx context.Context, wait time.Duration, o acquireOptions) (le *Lease, err error) {
	_, carried := ctx.Value(ownerKey{}).(string)
	o.fresh = !carried
	owner := l.c.ownerFrom(ctx)
	le, _, err = l.attemptFair(ctx, owner, 0, o)
	if le != nil || failFast(err, wait) {
		return le, err
	}
	if wait == 0 {
		return nil, ErrNotObtained
	}
	ttl := l.waiterTTL()
	err = l.c.waitFor(ctx, wait, l.channel()+":"+owner, "", false, 0, false, func(*subscription, *waiter, string) (bool, time.Duration, error) {
		var next time.Duration
		var err error
		le, next, err = l.attemptFair(ctx, owner, ttl, o)
		// Sleep until woken, or until something can change without a
		// message, and refresh the deadline before it runs out.
		return le != nil, min(fallback(next), ttl/3), err
	})
	if err != nil {
		if le == nil {
			l.leaveQueue(ctx, owner)
		}
		return nil, err
	}
	return le, nil
}

// attemptFair runs the fair acquire script once: queueing the owner (or
// refreshing its deadline) with ttl when it cannot take the lock, or only
// trying when ttl is 0. It returns a lease when the lock was taken,
// otherwise how long nothing can change without a message. Like attempt,
// it takes nothing when ctx has ended, and gives back what it took when
// ctx ended meanwhile.
func (l *Lock) attemptFair(ctx context.Context, owner string, ttl time.Duration, o acquireOptions) (*Lease, time.Duration, error) {
	if err := l.c.checkOpen(); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, waitError(ctx, err)
	}
	start := time.Now()
	// Not cut short by ctx, as in attempt.
	cmd, wait := l.evalAcquire(context.WithoutCancel(ctx), l.fairKeys(),
		o.lease.Milliseconds(), owner, ttl.Milliseconds(), l.channel())
	res, err := cmd.Int64Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("lockgen: acquiring %s: %w", l.key, err)
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("lockgen: acquiring %s: unexpected reply %v", l.key, res)
	}
	if res[0] == 1 {
		l.dropDuplicateHolds(ctx, owner, o, res[1])
		le, err := l.newLease(ctx, owner, o, start)
		if err != nil {
			return nil, 0, err
		}
		if err := l.checkSynced(context.WithoutCancel(ctx), le, wait); err != nil {
			return nil, 0, err
		}
		if err := ctx.Err(); err != nil {
			_ = le.Unlock(ctx)
			return nil, 0, waitError(ctx, err)
		}
		return le, 0, nil
	}
	return nil, time.Duration(res[1]) * time.Millisecond, nil
}

// leaveQueue takes a waiter that gives up out of the queue, waking the
// next one if it was first and the lock is free. It is best effort: a
// waiter that could not leave is evicted at its deadline. Like every
// release, it runs although ctx was cancelled (see ReleaseTimeout).
func (l *Lock) leaveQueue(ctx context.Context, owner string) {
	if l.def.Scripts.Leave == nil {
		return
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	_ = l.c.eval(ctx, l.def.Scripts.Leave, l.fairKeys(), owner, l.channel()).Err()
}
