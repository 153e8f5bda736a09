package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/lockgen/lockgen/scripts/bench/benchlocks"
)

// The rolling switches of docs/migration.md, run: while a deploy replaces
// code that takes a peer's lock with code that takes lockgen's, no two
// holders overlap. Step 1's code takes the peer's lock, then lockgen's;
// step 2's takes lockgen's alone. Old and step-1 code run together, then
// step-1 and step-2 code.

// oldTTL is the peer lock's TTL in these tests.
const oldTTL = 30 * time.Second

// lockBothRedislock is step 1 of the switch from redislock, as
// docs/migration.md shows it: the old lock first, then the new one; the
// work's context ends when lockgen's lease is lost or the old lock's TTL
// is about to run out.
func lockBothRedislock(ctx context.Context, old *redislock.Client, locks *benchlocks.Locks, id string) (context.Context, func(context.Context) error, error) {
	start := time.Now()
	ol, err := old.Obtain(ctx, "order:"+id, oldTTL, &redislock.Options{
		RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond), // wait, as Lock does, until ctx ends
	})
	if err != nil {
		return nil, nil, err
	}
	lease, err := locks.Resource(id).Lock(ctx)
	if err != nil {
		return nil, nil, errors.Join(err, ol.Release(context.WithoutCancel(ctx)))
	}
	work, cancel := context.WithDeadline(lease.Context(), start.Add(oldTTL*9/10))
	release := func(ctx context.Context) error {
		cancel()
		return errors.Join(lease.Unlock(ctx), ol.Release(ctx)) // the new one first
	}
	return work, release, nil
}

// lockBothRedsync is lockBothRedislock for redsync.
func lockBothRedsync(ctx context.Context, rs *redsync.Redsync, locks *benchlocks.Locks, id string) (context.Context, func(context.Context) error, error) {
	start := time.Now()
	m := rs.NewMutex("order:"+id, redsync.WithExpiry(oldTTL), redsync.WithTries(1<<30))
	if err := m.LockContext(ctx); err != nil {
		return nil, nil, err
	}
	lease, err := locks.Resource(id).Lock(ctx)
	if err != nil {
		_, uerr := m.UnlockContext(context.WithoutCancel(ctx))
		return nil, nil, errors.Join(err, uerr)
	}
	work, cancel := context.WithDeadline(lease.Context(), start.Add(oldTTL*9/10))
	release := func(ctx context.Context) error {
		cancel()
		_, uerr := m.UnlockContext(ctx)
		return errors.Join(lease.Unlock(ctx), uerr)
	}
	return work, release, nil
}

// lockFunc takes a lock for one critical section and returns its release.
type lockFunc func(ctx context.Context, id string) (func(context.Context) error, error)

// holders counts the goroutines inside the critical section; overlaps
// counts the times one found another there.
type holders struct{ in, overlaps atomic.Int32 }

// critical runs a short critical section.
func (h *holders) critical() {
	if h.in.Add(1) != 1 {
		h.overlaps.Add(1)
	}
	time.Sleep(200 * time.Microsecond) // a window for another holder to show
	h.in.Add(-1)
}

// runMixed runs rounds critical sections in each of the groups' goroutines
// at once, on one resource, and returns the overlaps seen.
func runMixed(t *testing.T, rounds int, groups ...lockFunc) int32 {
	t.Helper()
	var h holders
	var wg sync.WaitGroup
	for _, take := range groups {
		for range 3 {
			wg.Go(func() {
				for range rounds {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					release, err := take(ctx, "42")
					if err != nil {
						cancel()
						t.Error(err)
						return
					}
					h.critical()
					if err := release(context.Background()); err != nil {
						t.Error(err)
					}
					cancel()
				}
			})
		}
	}
	wg.Wait()
	return h.overlaps.Load()
}

func TestMigrationFromRedislock(t *testing.T) {
	flush(t)
	rdb := newRedis(t)
	old := redislock.New(rdb)
	locks := newLocks(t, rdb)
	oldOnly := func(ctx context.Context, id string) (func(context.Context) error, error) {
		l, err := old.Obtain(ctx, "order:"+id, oldTTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}
	both := func(ctx context.Context, id string) (func(context.Context) error, error) {
		_, release, err := lockBothRedislock(ctx, old, locks, id)
		return release, err
	}
	newOnly := func(ctx context.Context, id string) (func(context.Context) error, error) {
		lease, err := locks.Resource(id).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return lease.Unlock, nil
	}
	if n := runMixed(t, 30, oldOnly, both); n != 0 {
		t.Errorf("old and step-1 code: %d overlaps", n)
	}
	if n := runMixed(t, 30, both, newOnly); n != 0 {
		t.Errorf("step-1 and step-2 code: %d overlaps", n)
	}
	// Without step 1, old and new code overlap: the test can see it.
	if n := runMixed(t, 30, oldOnly, newOnly); n == 0 {
		t.Log("old and new code alone did not overlap in this run")
	}
}

func TestMigrationFromRedsync(t *testing.T) {
	flush(t)
	rdb := newRedis(t)
	rs := redsync.New(goredis.NewPool(rdb))
	locks := newLocks(t, rdb)
	oldOnly := func(ctx context.Context, id string) (func(context.Context) error, error) {
		m := rs.NewMutex("order:"+id, redsync.WithExpiry(oldTTL), redsync.WithTries(1<<30))
		if err := m.LockContext(ctx); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
	}
	both := func(ctx context.Context, id string) (func(context.Context) error, error) {
		_, release, err := lockBothRedsync(ctx, rs, locks, id)
		return release, err
	}
	newOnly := func(ctx context.Context, id string) (func(context.Context) error, error) {
		lease, err := locks.Resource(id).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return lease.Unlock, nil
	}
	if n := runMixed(t, 30, oldOnly, both); n != 0 {
		t.Errorf("old and step-1 code: %d overlaps", n)
	}
	if n := runMixed(t, 30, both, newOnly); n != 0 {
		t.Errorf("step-1 and step-2 code: %d overlaps", n)
	}
}
