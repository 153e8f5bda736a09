package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// isSingle reports whether b is the single-node backend, where a
// multi-lock over one client is atomic whatever its keys.
func isSingle(b backend) bool { return b.name == "single" }

// TestMultiLockNoDeadlock: goroutines locking {A,B} and {B,A} over and
// over, through the atomic script (one client, single node) and in key
// order (locks from two clients, or on a cluster), together with a plain
// lock of A, never deadlock and never overlap.
func TestMultiLockNoDeadlock(t *testing.T) {
	rounds := 150
	if testing.Short() {
		rounds = 30
	}
	eachBackend(t, func(t *testing.T, b backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		d := def(t, lockrt.Reentrant, 5*time.Second, true, time.Minute)
		ka, kb := key(t, "A"), key(t, "B")
		var inA, inB, overlaps, done atomic.Int64
		enter := func() {
			if inA.Add(1) != 1 || inB.Add(1) != 1 {
				overlaps.Add(1)
			}
			time.Sleep(100 * time.Microsecond)
			inA.Add(-1)
			inB.Add(-1)
		}
		c1, c2, c3, c4 := newClient(t, b), newClient(t, b), newClient(t, b), newClient(t, b)
		multis := []*lockrt.MultiLock{
			lockrt.NewMultiLock(c1.Lock(d, ka), c1.Lock(d, kb)),
			lockrt.NewMultiLock(c2.Lock(d, kb), c2.Lock(d, ka)),
			lockrt.NewMultiLock(c3.Lock(d, kb), c4.Lock(d, ka)), // two clients: in key order
		}
		for i, m := range multis {
			if want := isSingle(b) && i < 2; m.Atomic() != want {
				t.Fatalf("multi-lock %d: Atomic() = %v, want %v", i, m.Atomic(), want)
			}
		}
		var wg sync.WaitGroup
		for _, m := range multis {
			wg.Go(func() {
				for range rounds {
					ml, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					enter()
					done.Add(1)
					if err := ml.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		// A plain lock of A alone, excluded by both.
		wg.Go(func() {
			l := c4.Lock(d, ka)
			for range rounds {
				le, err := l.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if inA.Add(1) != 1 {
					overlaps.Add(1)
				}
				inA.Add(-1)
				if err := le.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Wait()
		if n := overlaps.Load(); n != 0 {
			t.Errorf("%d critical sections overlapped", n)
		}
		if got, want := done.Load(), int64(len(multis)*rounds); got != want {
			t.Errorf("%d multi-lock sections ran, want %d", got, want)
		}
	})
}

// TestMultiLockReleasesOnFailure: when one lock is held elsewhere, the
// multi-lock fails after its wait and leaves none of the others taken,
// whichever position the held lock has in the order.
func TestMultiLockReleasesOnFailure(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, 10*time.Second, true, 200*time.Millisecond)
		ds := def(t, lockrt.Simple, 10*time.Second, true, 200*time.Millisecond)
		c, other, third := newClient(t, b), newClient(t, b), newClient(t, b)
		ka, kb, kc := key(t, "A"), key(t, "B"), key(t, "C")
		for _, held := range []string{ka, kb, kc} {
			hd := d
			if held == kb {
				hd = ds
			}
			hl, err := other.Lock(hd, held).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []*lockrt.MultiLock{
				lockrt.NewMultiLock(c.Lock(d, kc), c.Lock(ds, kb), c.Lock(d, ka)),
				lockrt.NewMultiLock(c.Lock(d, kc), third.Lock(ds, kb), c.Lock(d, ka)),
			} {
				name := fmt.Sprintf("held %s, atomic %v", held, m.Atomic())
				start := time.Now()
				if _, err := m.Lock(ctx); !errors.Is(err, lockrt.ErrNotObtained) {
					t.Fatalf("%s: err = %v, want ErrNotObtained", name, err)
				}
				if waited := time.Since(start); waited < 150*time.Millisecond {
					t.Errorf("%s: gave up after %v, before the default wait", name, waited)
				}
				dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				_, err := m.Lock(dctx)
				cancel()
				if !errors.Is(err, lockrt.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s: with a deadline: err = %v, want ErrNotObtained and DeadlineExceeded", name, err)
				}
				if _, err := m.TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
					t.Fatalf("%s: TryLock(0): err = %v, want ErrNotObtained", name, err)
				}
				for _, k := range []string{ka, kb, kc} {
					if k == held {
						continue
					}
					if n, err := c.Redis().Exists(ctx, k).Result(); err != nil || n != 0 {
						t.Fatalf("%s: %s left locked (%v, %v)", name, k, n, err)
					}
				}
			}
			if err := hl.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := lockrt.NewMultiLock().Lock(ctx); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("empty multi-lock: err = %v, want ErrInvalidArgument", err)
		}
		if _, err := lockrt.NewMultiLock(c.Lock(d, ka), nil).Lock(ctx); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("nil member: err = %v, want ErrInvalidArgument", err)
		}
		if _, err := lockrt.NewMultiLock(c.Lock(d, ka)).TryLock(ctx, -time.Second); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("negative wait: err = %v, want ErrInvalidArgument", err)
		}
	})
}

// TestMultiLockWakesOnRelease: a waiting multi-lock is woken by the
// release of the lock that blocked it, not by its 30 s lease running out,
// also (atomic) when another lock blocks it next.
func TestMultiLockWakesOnRelease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
		ka, kb := key(t, "A"), key(t, "B")
		h := newClient(t, b)
		hb, err := h.Lock(d, kb).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t, b)
		m := lockrt.NewMultiLock(c.Lock(d, ka), c.Lock(d, kb))
		got := inBackground(t, func() (*lockrt.MultiLease, error) { return m.Lock(ctx) })
		waitWaiting(t, c, kb, 1, 1)
		if m.Atomic() {
			// The waiter holds nothing: take A before releasing B, so that
			// A blocks it next and it must switch channels.
			ha, err := h.Lock(d, ka).TryLock(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := hb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			waitWaiting(t, c, ka, 1, 1) // blocked by A now
			hb = ha
		}
		released := time.Now()
		if err := hb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case ml := <-got:
			if ml == nil {
				return
			}
			t.Logf("multi-lock obtained %v after the release", time.Since(released))
			if err := ml.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting multi-lock was not woken by the release")
		}
	})
}

// TestMultiLockLost: deleting one lock's key cancels the multi-lease's
// context with ErrLockLost at that lock's next renewal; Unlock then
// reports the loss and still releases the other lock.
func TestMultiLockLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		// Renewed every second, with two to spare before the lease's
		// end on a loaded machine (900ms, renewed every 300ms, was lost
		// once at load 10 with the race detector).
		const lease = 3 * time.Second
		d := def(t, lockrt.Reentrant, lease, true, time.Second)
		ds := def(t, lockrt.Simple, lease, true, time.Second)
		c := newClient(t, b)
		ka, kb := key(t, "A"), key(t, "B")
		ml, err := lockrt.NewMultiLock(c.Lock(d, ka), c.Lock(ds, kb)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease) // renewed meanwhile
		if err := ml.Context().Err(); err != nil {
			t.Fatalf("multi-lease ended while renewed: %v", context.Cause(ml.Context()))
		}
		if err := c.Redis().Del(ctx, kb).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ml.Context().Done():
		case <-time.After(2 * lease):
			t.Fatal("multi-lease not cancelled after a lock's key was deleted")
		}
		if cause := context.Cause(ml.Context()); !errors.Is(cause, lockrt.ErrLockLost) {
			t.Fatalf("cause = %v, want ErrLockLost", cause)
		}
		if err := ml.Unlock(ctx); !errors.Is(err, lockrt.ErrLockLost) {
			t.Fatalf("Unlock = %v, want ErrLockLost", err)
		}
		if n, _ := c.Redis().Exists(ctx, ka).Result(); n != 0 {
			t.Fatal("the lock that was not lost stayed locked after Unlock")
		}
		if err := ml.Unlock(ctx); !errors.Is(err, lockrt.ErrNotHeld) {
			t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
		}
	})
}

// TestMultiLockReentry: a multi-lease's context re-enters its reentrant
// locks, alone or as a multi-lock; a simple lock in the set refuses; a
// lock given twice is taken once.
func TestMultiLockReentry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, 10*time.Second, true, 0)
		ds := def(t, lockrt.Simple, 10*time.Second, true, 0)
		c := newClient(t, b)
		ka, kb, kc := key(t, "A"), key(t, "B"), key(t, "C")
		m := lockrt.NewMultiLock(c.Lock(d, kb), c.Lock(d, ka), c.Lock(d, kb))
		if n := len(m.Locks()); n != 2 {
			t.Fatalf("%d locks, want 2 (B given twice)", n)
		}
		if m.Locks()[0].Key() != ka {
			t.Fatalf("first lock %s, want %s (key order)", m.Locks()[0].Key(), ka)
		}
		ml, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again, err := m.Lock(ml.Context())
		if err != nil {
			t.Fatalf("re-entering the multi-lock: %v", err)
		}
		one, err := c.Lock(d, ka).Lock(ml.Context())
		if err != nil {
			t.Fatalf("re-entering one lock: %v", err)
		}
		if n := holds(t, c.Redis(), ka); n != "3" {
			t.Fatalf("holds of A = %s, want 3", n)
		}
		if _, err := newClient(t, b).Lock(d, kb).TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("another owner: %v, want ErrNotObtained", err)
		}
		for _, unlock := range []func(context.Context) error{one.Unlock, again.Unlock, ml.Unlock} {
			if err := unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range []string{ka, kb} {
			if n, _ := c.Redis().Exists(ctx, k).Result(); n != 0 {
				t.Fatalf("%s still locked after every unlock", k)
			}
		}

		withSimple := lockrt.NewMultiLock(c.Lock(d, ka), c.Lock(ds, kc))
		ml, err = withSimple.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := withSimple.Lock(ml.Context()); !errors.Is(err, lockrt.ErrNotReentrant) {
			t.Fatalf("re-entering a set with a simple lock: %v, want ErrNotReentrant", err)
		}
		if n := holds(t, c.Redis(), ka); n != "1" {
			t.Fatalf("holds of A after the refused re-entry = %s, want 1", n)
		}
		if err := ml.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMultiLockKinds: fair, fenced and reentrant locks in one multi-lock
// (taken in key order), with the fenced lock's token in its lease.
func TestMultiLockKinds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		m := lockrt.NewMultiLock(
			c.Lock(def(t, lockrt.Fair, 5*time.Second, true, time.Second), key(t, "fair")),
			c.Lock(def(t, lockrt.Fenced, 5*time.Second, true, time.Second), key(t, "fenced")),
			c.Lock(def(t, lockrt.Reentrant, 5*time.Second, true, time.Second), key(t, "plain")),
		)
		if m.Atomic() {
			t.Fatal("a multi-lock with fair and fenced locks claims to be atomic")
		}
		var last int64
		for range 3 {
			ml, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var token int64
			for _, le := range ml.Leases() {
				token += le.Token()
			}
			if token <= last {
				t.Fatalf("fencing token %d after %d", token, last)
			}
			last = token
			if err := ml.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestMultiLockRoundTrips: an atomic multi-lock takes and releases all its
// locks in one round trip each; in key order it costs one per lock.
func TestMultiLockRoundTrips(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		rdb := b.new()
		defer rdb.Close()
		c := lockrt.New(rdb)
		defer c.Close()
		d := def(t, lockrt.Reentrant, 5*time.Second, true, 0)
		ds := def(t, lockrt.Simple, 5*time.Second, true, 0)
		s := d.Scripts
		if err := c.Preload(ctx, s.Acquire, s.Release, s.MultiAcquire, s.MultiRelease, ds.Scripts.Acquire, ds.Scripts.Release); err != nil {
			t.Fatal(err)
		}
		m := lockrt.NewMultiLock(c.Lock(d, key(t, "A")), c.Lock(ds, key(t, "B")), c.Lock(d, key(t, "C")))
		per := int64(1)
		if !m.Atomic() {
			per = 3
		}
		h := &countHook{}
		rdb.AddHook(h)
		for i := range 5 {
			ml, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := ml.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if got, want := h.n.Load(), 2*per*int64(i+1); got != want {
				t.Fatalf("after %d Lock+Unlock (atomic %v): %d round trips, want %d", i+1, m.Atomic(), got, want)
			}
		}
	})
}

// TestMultiLockLeavesOnGiveUp: an atomic multi-lock whose wait runs out
// takes its entry ("<owner> m") out of the blocking lock's waiter
// registry at once, instead of leaving it to its deadline, so that the
// next release does not wake it in vain.
func TestMultiLockLeavesOnGiveUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := redistest.Single(t)
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	d.WaiterTTL = time.Minute // only leaving can take the entry out
	ka, kb := key(t, "A"), key(t, "B")
	h := lockrt.New(n.Client())
	defer h.Close()
	hb, err := h.Lock(d, kb).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Unlock(ctx)
	c := lockrt.New(n.Client())
	defer c.Close()
	m := lockrt.NewMultiLock(c.Lock(d, ka), c.Lock(d, kb))
	if !m.Atomic() {
		t.Fatal("the multi-lock is not atomic")
	}
	if _, err := m.TryLock(ctx, 300*time.Millisecond); !errors.Is(err, lockrt.ErrNotObtained) {
		t.Fatalf("TryLock: %v, want ErrNotObtained", err)
	}
	queued, err := n.Client().LLen(ctx, keys.Sub(kb, "queue")).Result()
	if err != nil {
		t.Fatal(err)
	}
	members, err := n.Client().ZCard(ctx, keys.Sub(kb, "waiters")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if queued != 0 || members != 0 {
		t.Fatalf("after the multi-lock gave up, B's registry holds %d queued and %d members, want none", queued, members)
	}
}
