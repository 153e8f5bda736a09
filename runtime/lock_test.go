package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestMutualExclusion: 8 clients x 4 goroutines x 500 critical sections on
// one reentrant lock (100 in `make test`: see volume), and never two
// holders at once.
func TestMutualExclusion(t *testing.T) {
	const clients, goroutines, sections = 8, 4, 500
	n := volume(sections, 50)
	eachBackend(t, func(t *testing.T, b backend) {
		d := def(t, lockrt.Reentrant, 5*time.Second, true, time.Minute)
		k := key(t)
		var inside, overlaps, done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, clients*goroutines)
		for range clients {
			c := newClient(t, b)
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						le, err := c.Lock(d, k).Lock(context.Background())
						if err != nil {
							errs <- err
							return
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						done.Add(1)
						inside.Add(-1)
						if err := le.Unlock(context.Background()); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := overlaps.Load(); got != 0 {
			t.Errorf("%d critical sections overlapped", got)
		}
		if got, want := done.Load(), int64(clients*goroutines*n); got != want {
			t.Errorf("%d critical sections ran, want %d", got, want)
		}
	})
}

// TestReentry: depth 3 through the lease's context, then full release.
func TestReentry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		l := c.Lock(def(t, lockrt.Reentrant, 10*time.Second, true, 0), key(t))
		l1, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := l.Lock(l1.Context())
		if err != nil {
			t.Fatal(err)
		}
		// From another goroutine, with a context derived from the lease's.
		var l3 *lockrt.Lease
		done := make(chan error)
		go func() {
			var err error
			child, cancel := context.WithCancel(l2.Context())
			defer cancel()
			l3, err = l.TryLock(child, 0)
			done <- err
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := holds(t, c.Redis(), l.Key()); n != "3" {
			t.Fatalf("holds = %s, want 3", n)
		}
		// Another owner is excluded meanwhile.
		if _, err := l.TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("another owner: err = %v, want ErrNotObtained", err)
		}
		for i, le := range []*lockrt.Lease{l3, l2, l1} {
			if locked, err := l.IsLocked(ctx); err != nil || !locked {
				t.Fatalf("before unlock %d: IsLocked = %v, %v", i, locked, err)
			}
			if err := le.Unlock(ctx); err != nil {
				t.Fatalf("unlock %d: %v", i, err)
			}
		}
		if locked, err := l.IsLocked(ctx); err != nil || locked {
			t.Fatalf("after full release: IsLocked = %v, %v", locked, err)
		}
		if err := l1.Context().Err(); err == nil {
			t.Fatal("lease context not cancelled after Unlock")
		}
	})
}

// holds returns the hold count a reentrant lock's key records: its value
// is "<owner> <holds>".
func holds(t testing.TB, rdb redis.UniversalClient, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	f := strings.Fields(v)
	if len(f) < 2 {
		t.Fatalf("%s = %q, want \"<owner> <holds>\"", key, v)
	}
	return f[1]
}

// TestUnlockByNonOwner: a lease whose lock expired and was taken by
// another owner cannot release it; unlocking twice fails too.
func TestUnlockByNonOwner(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		a, c := newClient(t, b), newClient(t, b)
		k := key(t)
		// A fixed lease: the next holder's must last to its Unlock, on a
		// loaded machine too.
		d := def(t, lockrt.Reentrant, time.Second, false, 5*time.Second)
		la, err := a.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lc, err := c.Lock(d, k).Lock(ctx) // waits for a's lease to run out
		if err != nil {
			t.Fatal(err)
		}
		if err := la.Unlock(ctx); !errors.Is(err, lockrt.ErrNotHeld) && !errors.Is(err, lockrt.ErrLockLost) {
			t.Fatalf("unlock by the previous holder: err = %v, want ErrNotHeld or ErrLockLost", err)
		}
		if cause := context.Cause(la.Context()); !errors.Is(cause, lockrt.ErrLockLost) {
			t.Errorf("expired lease's context cause = %v, want ErrLockLost", cause)
		}
		if locked, _ := c.Lock(d, k).IsLocked(ctx); !locked {
			t.Fatal("the holder's lock was released by a non-owner")
		}
		if err := lc.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lc.Unlock(ctx); !errors.Is(err, lockrt.ErrNotHeld) {
			t.Fatalf("second unlock: err = %v, want ErrNotHeld", err)
		}
	})
}

// TestWatchdogKeepsLease: a 1 s lease held for 5 s.
func TestWatchdogKeepsLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		const lease = time.Second
		l := c.Lock(def(t, lockrt.Reentrant, lease, true, 0), key(t))
		le, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		other := newClient(t, b).Lock(def(t, lockrt.Reentrant, lease, true, 0), l.Key())
		for range 10 {
			time.Sleep(lease / 2) // five leases in all: renewed past each
			if err := le.Context().Err(); err != nil {
				t.Fatalf("lease lost: %v", context.Cause(le.Context()))
			}
			if _, err := other.TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
				t.Fatalf("another client took the lock: %v", err)
			}
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDeadHolderExpires: a client that dies without unlocking frees the
// lock after its lease.
func TestDeadHolderExpires(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const lease = 3 * time.Second // renewed every 1s: survives a 2s stall (two busy loops beside the suite stalled the 1.5s lease past its end)
		d := def(t, lockrt.Reentrant, lease, true, 0)
		k := key(t)
		rdb := b.new()
		dead := lockrt.New(rdb)
		if _, err := dead.Lock(d, k).Lock(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease) // renewed meanwhile
		dead.Close()      // the process dies: no more renewals, no unlock
		rdb.Close()
		l := newClient(t, b).Lock(d, k)
		if _, err := l.TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("lock free right after the holder died: %v", err)
		}
		start := time.Now()
		// Its end is found by the waiter's client: at once when the lease
		// had more than HandoffLease left when it registered, else at the
		// client's next refresh of its registration (LiveRegistryTTL/3: a
		// hold that short may be a hand-off, which its new holder renews),
		// as on a loaded machine that stalled the test past the lease.
		le, err := l.TryLock(ctx, lease+lockrt.LiveRegistryTTL/3+5*time.Second)
		if err != nil {
			t.Fatalf("lock not freed after the dead holder's lease: %v", err)
		}
		t.Logf("obtained %v after the holder died", time.Since(start))
		le.Unlock(ctx)
	})
}

// TestKeyDeletedCancelsLease: deleting the key from outside cancels the
// lease's context, with ErrLockLost, at the next renewal (within lease/3).
func TestKeyDeletedCancelsLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const lease = 3 * time.Second
		c := newClient(t, b)
		l := c.Lock(def(t, lockrt.Reentrant, lease, true, 0), key(t))
		le, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Redis().Del(ctx, l.Key()).Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		select {
		case <-le.Context().Done():
		case <-time.After(lease / 2): // lease/3 plus scheduling slack
			t.Fatalf("lease context not cancelled %v after the key was deleted", lease/2)
		}
		t.Logf("lease context cancelled %v after the key was deleted", time.Since(start))
		if cause := context.Cause(le.Context()); !errors.Is(cause, lockrt.ErrLockLost) {
			t.Fatalf("cause = %v, want ErrLockLost", cause)
		}
		if err := le.Unlock(ctx); !errors.Is(err, lockrt.ErrLockLost) {
			t.Fatalf("Unlock of a lost lease: %v, want ErrLockLost", err)
		}
	})
}

// TestScriptFlush: the script cache survives SCRIPT FLUSH, both for calls
// and for the watchdog's pipelined renewals. It runs on a node and a
// cluster of its own: its flushes would add round trips to the tests that
// count them (TestRoundTrips) on the shared ones.
func TestScriptFlush(t *testing.T) {
	t.Parallel()
	_, single := ownNode(t)
	_, cluster := ownCluster(t)
	for _, b := range []backend{single, cluster} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			scriptFlush(t, b)
		})
	}
}

// scriptFlush is TestScriptFlush on b.
func scriptFlush(t *testing.T, b backend) {
	ctx := context.Background()
	c := newClient(t, b)
	flush := func() {
		t.Helper()
		var err error
		switch rdb := c.Redis().(type) {
		case *redis.ClusterClient:
			err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.ScriptFlush(ctx).Err() })
		default:
			err = rdb.ScriptFlush(ctx).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	const lease = 1500 * time.Millisecond // renewed every 500ms: survives a 1s stall
	d := def(t, lockrt.Reentrant, lease, true, time.Second)
	held := c.Lock(d, key(t, "held"))
	le, err := held.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if i%5 == 0 {
			flush()
		}
		le, err := c.Lock(d, key(t, "loop")).Lock(ctx)
		if err != nil {
			t.Fatalf("lock after SCRIPT FLUSH: %v", err)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatalf("unlock after SCRIPT FLUSH: %v", err)
		}
		time.Sleep(lease / 12) // 20 rounds span renewals of the held lock (every lease/3)
	}
	// The held lock's lease was renewed through flushes.
	if err := le.Context().Err(); err != nil {
		t.Fatalf("lease lost across SCRIPT FLUSH: %v", context.Cause(le.Context()))
	}
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWaiterWakesOnRelease: a waiter wakes on the release message, not
// when the holder's 30 s lease would have run out.
func TestWaiterWakesOnRelease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
		k := key(t)
		holder, err := newClient(t, b).Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wc := newClient(t, b)
		waiter := wc.Lock(d, k)
		got := make(chan time.Time, 1)
		go func() {
			le, err := waiter.Lock(ctx)
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- time.Now()
			le.Unlock(ctx)
		}()
		waitWaiting(t, wc, k, 1, 1)
		released := time.Now()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at, ok := <-got:
			if !ok {
				return
			}
			t.Logf("waiter obtained the lock %v after the release", at.Sub(released))
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by the release")
		}
	})
}

// TestWaitTimesOut: Lock returns ErrNotObtained after the default wait, and
// also matches the context's error when the caller's deadline ended it.
func TestWaitTimesOut(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, 10*time.Second, true, 200*time.Millisecond)
		k := key(t)
		le, err := newClient(t, b).Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer le.Unlock(ctx)
		other := newClient(t, b).Lock(d, k)
		if _, err := other.Lock(ctx); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("default wait: err = %v, want ErrNotObtained", err)
		}
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err = other.Lock(dctx)
		if !errors.Is(err, lockrt.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("context deadline: err = %v, want ErrNotObtained and DeadlineExceeded", err)
		}
		if _, err := other.TryLock(ctx, -time.Second); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("negative wait: err = %v, want ErrInvalidArgument", err)
		}
	})
}

// TestSimpleLock: exclusion, no re-entry, compare-and-delete.
func TestSimpleLock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Simple, 5*time.Second, true, failAfter) // the wait bounds a failure only
		k := key(t)
		c := newClient(t, b)
		le, err := c.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lock(d, k).Lock(le.Context()); !errors.Is(err, lockrt.ErrNotReentrant) {
			t.Fatalf("re-entry: err = %v, want ErrNotReentrant", err)
		}
		if _, err := newClient(t, b).Lock(d, k).TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("other owner: err = %v, want ErrNotObtained", err)
		}
		ttl, err := c.Lock(d, k).TTL(ctx)
		if err != nil || ttl <= 0 || ttl > 5*time.Second {
			t.Fatalf("TTL = %v, %v", ttl, err)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := le.Unlock(ctx); !errors.Is(err, lockrt.ErrNotHeld) {
			t.Fatalf("second unlock: %v", err)
		}
		// Mutual exclusion with a few clients.
		var inside, overlaps atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			c := newClient(t, b)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					le, err := c.Lock(d, k).Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					inside.Add(-1)
					if err := le.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if overlaps.Load() != 0 {
			t.Fatalf("%d overlaps", overlaps.Load())
		}
	})
}

// TestForceUnlock wakes waiters and cancels the holder's lease at its next
// renewal.
func TestForceUnlock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, 900*time.Millisecond, true, 10*time.Second)
		k := key(t)
		le, err := newClient(t, b).Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		admin := newClient(t, b).Lock(d, k)
		ok, err := admin.ForceUnlock(ctx)
		if err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		select {
		case <-le.Context().Done():
		case <-time.After(5 * time.Second):
		}
		if !errors.Is(context.Cause(le.Context()), lockrt.ErrLockLost) {
			t.Fatalf("holder's lease: cause %v, want ErrLockLost", context.Cause(le.Context()))
		}
		if ok, err := admin.ForceUnlock(ctx); err != nil || ok {
			t.Fatalf("ForceUnlock of a free lock = %v, %v", ok, err)
		}
	})
}

// TestCloseCancelsLeases: closing the client cancels its leases with
// ErrClosed, and a closed client refuses to lock.
func TestCloseCancelsLeases(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, 5*time.Second, true, 0)
		c := newClient(t, b)
		le, err := c.Lock(d, key(t)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if cause := context.Cause(le.Context()); !errors.Is(cause, lockrt.ErrClosed) {
			t.Fatalf("cause = %v, want ErrClosed", cause)
		}
		if _, err := c.Lock(d, key(t)).Lock(ctx); !errors.Is(err, lockrt.ErrClosed) {
			t.Fatalf("Lock after Close: %v, want ErrClosed", err)
		}
	})
}

// countHook counts the commands a client sends (a pipeline's commands
// count once: it is one round trip).
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestRoundTrips: an uncontended Lock and Unlock take one round trip each,
// once the scripts are loaded.
func TestRoundTrips(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		rdb := b.new()
		defer rdb.Close()
		c := lockrt.New(rdb)
		defer c.Close()
		d := def(t, lockrt.Reentrant, 5*time.Second, true, 0)
		s := d.Scripts
		if err := c.Preload(ctx, s.Acquire, s.Release, s.Renew, s.ForceUnlock); err != nil {
			t.Fatal(err)
		}
		h := &countHook{}
		rdb.AddHook(h)
		for i := range 10 {
			le, err := c.Lock(d, key(t)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if got := h.n.Load(); got != int64(2*(i+1)) {
				t.Fatalf("after %d Lock+Unlock: %d round trips, want %d", i+1, got, 2*(i+1))
			}
		}
	})
}

// TestPreloadDetectsMismatch: a script whose SHA1 was edited is refused.
func TestPreloadDetectsMismatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b)
		s := *script(t, "force_unlock")
		s.SHA1 = "0000000000000000000000000000000000000000"
		if err := c.Preload(context.Background(), &s); !errors.Is(err, lockrt.ErrScriptMismatch) {
			t.Fatalf("err = %v, want ErrScriptMismatch", err)
		}
	})
}

// TestWatchdogRenewsMany: the watchdog keeps 50 held locks of a client
// past their lease. (That it renews them in one pipeline per round, not
// one round trip per lock, is counted over a time window by
// TestWatchdogBatches in scripts/bench.)
func TestWatchdogRenewsMany(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const locks = 50
		rdb := b.new()
		defer rdb.Close()
		c := lockrt.New(rdb)
		defer c.Close()
		d := def(t, lockrt.Reentrant, 900*time.Millisecond, true, 0)
		var leases []*lockrt.Lease
		for i := range locks {
			le, err := c.Lock(d, key(t, strconv.Itoa(i))).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, le)
		}
		time.Sleep(time.Second) // past the 900ms lease: three renewal rounds at lease/3
		for i, le := range leases {
			if err := le.Context().Err(); err != nil {
				t.Fatalf("lease %d lost: %v", i, context.Cause(le.Context()))
			}
		}
		for _, le := range leases {
			if err := le.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
