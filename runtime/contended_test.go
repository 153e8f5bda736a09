package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestContendedFirstAttempt: a client that found a fair lock, a
// read-write lock or a semaphore contended lately sends its next first
// attempt there without the uncontended check (see contention): a
// waiter's first attempt on a held object registers without an EXISTS
// (counted by INFO commandstats on a node of the test's own once its
// entry is in the registry; with no hint, it runs one). And when the
// object is free by then, such an
// attempt still takes it (the slow path): one hold, and its release
// leaves nothing behind.
func TestContendedFirstAttempt(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	rdb := node.Client()
	ctx := context.Background()
	holder, waiter := newClient(t, b), newClient(t, b)
	fair := def(t, lockrt.Fair, 30*time.Second, true, time.Minute)
	rw := def(t, lockrt.ReadWrite, 30*time.Second, true, time.Minute)
	sd := semDef(t, 1, 30*time.Second, true, time.Minute)
	preloadLock(t, b, fair)
	preloadLock(t, b, rw)
	if err := holder.Preload(ctx, sd.Scripts.Acquire, sd.Scripts.Release); err != nil {
		t.Fatal(err)
	}
	// take runs one acquisition of c on k with wait: it returns the
	// release, or the acquisition's error.
	type taker func(c *lockrt.Client, k string, wait time.Duration) (func() error, error)
	lockTaker := func(l func(c *lockrt.Client, k string) *lockrt.Lock) taker {
		return func(c *lockrt.Client, k string, wait time.Duration) (func() error, error) {
			lk := l(c, k)
			le, err := lk.TryLock(ctx, wait)
			if err != nil {
				return nil, err
			}
			if n, err := lk.HoldCount(le.Context()); err != nil || n != 1 {
				t.Errorf("%s: hold count %d (%v), want 1", k, n, err)
			}
			return func() error { return le.Unlock(ctx) }, nil
		}
	}
	for _, tc := range []struct {
		name string
		take taker
	}{
		{"fair", lockTaker(func(c *lockrt.Client, k string) *lockrt.Lock { return c.Lock(fair, k) })},
		{"read-write", lockTaker(func(c *lockrt.Client, k string) *lockrt.Lock { return c.RWLock(rw, k).Write() })},
		{"semaphore", func(c *lockrt.Client, k string, wait time.Duration) (func() error, error) {
			p, err := c.Semaphore(sd, k).TryAcquire(ctx, 1, wait)
			if err != nil {
				return nil, err
			}
			return func() error { return p.Release(ctx) }, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, contended := range []bool{false, true} {
				k := key(t, tc.name, map[bool]string{false: "cold", true: "hinted"}[contended])
				release, err := tc.take(holder, k, 0)
				if err != nil {
					t.Fatal(err)
				}
				if contended {
					lockrt.SawContended(waiter, k)
				}
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				// The waiter's first attempt registers it; it gets the
				// object once the holder releases it.
				got := inBackground(t, func() (func() error, error) { return tc.take(waiter, k, time.Minute) })
				waitRegistered(t, rdb, k, 1)
				exists := commandCalls(t, []*redis.Client{rdb}, "exists")
				if want := map[bool]int64{false: 1, true: 0}[contended]; exists != want {
					t.Errorf("contended %v: %d EXISTS in the waiter's first attempt, want %d", contended, exists, want)
				}
				if err := release(); err != nil {
					t.Fatal(err)
				}
				waiterRelease := <-got
				if waiterRelease == nil {
					t.Fatalf("contended %v: the waiter did not get the object", contended)
				}
				if err := waiterRelease(); err != nil {
					t.Fatal(err)
				}
			}
			// A stale hint: the object is free.
			k := key(t, tc.name, "free")
			lockrt.SawContended(waiter, k)
			release, err := tc.take(waiter, k, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
				t.Errorf("the object's key left after the release of a hint's hold (%v)", err)
			}
		})
	}
}
