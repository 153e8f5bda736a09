package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// semDef returns a semaphore definition with the runtime's scripts.
func semDef(t testing.TB, permits int, lease time.Duration, renew bool, wait time.Duration) *lockrt.SemaphoreDef {
	return &lockrt.SemaphoreDef{
		Name: t.Name(), Permits: permits, Lease: lease, Renew: renew, Wait: wait,
		Scripts: lockimpl.Scripts().Semaphores(),
	}
}

// TestSemaphoreBound: 10 clients x 4 goroutines take a semaphore of 3
// permits thousands of times, and never more than 3 hold it at once.
func TestSemaphoreBound(t *testing.T) {
	const clients, goroutines, permits = 10, 4, 3
	n := 50 // acquisitions per goroutine: 2000 in all
	if testing.Short() {
		n = 5
	}
	eachBackend(t, func(t *testing.T, b backend) {
		d := semDef(t, permits, 5*time.Second, true, time.Minute)
		k := key(t)
		var inside, most, done, lost atomic.Int64
		var wg sync.WaitGroup
		for range clients {
			c := newClient(t, b)
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						p, err := c.Semaphore(d, k).Acquire(context.Background(), 1)
						if err != nil {
							t.Error(err)
							return
						}
						now := inside.Add(1)
						for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
						}
						time.Sleep(time.Millisecond) // hold it a little, so holds overlap
						done.Add(1)
						inside.Add(-1)
						switch err := p.Release(context.Background()); {
						case errors.Is(err, lockrt.ErrPermitLost):
							// Its lease ran out in Redis (a stall past a
							// hand-off's 1 s lease on a loaded machine):
							// its context said so, and another holder
							// may have had the permit meanwhile.
							lost.Add(1)
						case err != nil:
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		switch got := most.Load(); {
		case lost.Load() == 0 && got != permits:
			t.Errorf("at most %d holders at once, want %d (never more, and all permits used)", got, permits)
		case got > permits+lost.Load():
			t.Errorf("at most %d holders at once with %d permits lost, want at most %d", got, lost.Load(), permits+lost.Load())
		case lost.Load() > 0:
			t.Logf("%d permits lost (their leases ran out while held: a loaded machine)", lost.Load())
		}
		if got, want := done.Load(), int64(clients*goroutines*n); got != want {
			t.Errorf("%d acquisitions, want %d", got, want)
		}
		t.Logf("%d acquisitions, at most %d holders at once", done.Load(), most.Load())
		if free, err := newClient(t, b).Semaphore(d, k).Available(context.Background()); err != nil || free != permits {
			t.Errorf("Available after all released = %d, %v; want %d", free, err, permits)
		}
	})
}

// TestSemaphoreManyPermits: holds of several permits count as many, and
// one release of 4 permits lets 4 waiters of one client through at once,
// not one per fallback timer.
func TestSemaphoreManyPermits(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := semDef(t, 4, 30*time.Second, true, time.Minute)
		k := key(t)
		holder := newClient(t, b).Semaphore(d, k)
		p3, err := holder.Acquire(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.TryAcquire(ctx, 2, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("2 of the 1 free permit: err = %v, want ErrNotObtained", err)
		}
		p1, err := holder.TryAcquire(ctx, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p3.Permits() != 3 || p1.Permits() != 1 {
			t.Fatalf("Permits() = %d, %d", p3.Permits(), p1.Permits())
		}
		if free, err := holder.Available(ctx); err != nil || free != 0 {
			t.Fatalf("Available = %d, %v; want 0", free, err)
		}
		// Four waiters on one client, one of them asking for 2 first.
		c := newClient(t, b)
		var wg sync.WaitGroup
		got := make(chan time.Time, 4)
		for i, want := range []int{2, 1, 1} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := c.Semaphore(d, k).Acquire(ctx, want)
				if err != nil {
					t.Error(err)
					return
				}
				got <- time.Now()
				defer p.Release(ctx)
				<-p.Context().Done() // hold until the test ends
			}()
			waitWaiting(t, c, k, int64(i+1), i+1) // queued in this order
		}
		released := time.Now()
		if err := p3.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case at := <-got:
				t.Logf("a waiter got its permits %v after the release", at.Sub(released))
			case <-time.After(5 * time.Second): // the fallback timer is 20s
				t.Fatal("waiters not woken by one release of 3 permits")
			}
		}
		// The 2 + 1 taken, 1 left by p1: the last waiter gets it when
		// p1 is released.
		if err := p1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("last waiter not woken")
		}
		c.Close() // ends the holders' contexts
		wg.Wait()
	})
}

// TestSemaphoreDeadHolder: a client that dies holding every permit gives
// them back after its lease, to a waiter on another client.
func TestSemaphoreDeadHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const lease = 3 * time.Second // renewed every 1s: survives a 2s stall (two busy loops beside the suite stalled the 1.5s lease past its end)
		d := semDef(t, 3, lease, true, 0)
		k := key(t)
		rdb := b.new()
		dead := lockrt.New(rdb)
		if _, err := dead.Semaphore(d, k).Acquire(ctx, 3); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease) // renewed meanwhile
		dead.Close()      // the process dies: no renewal, no release
		rdb.Close()
		s := newClient(t, b).Semaphore(d, k)
		if _, err := s.TryAcquire(ctx, 1, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("permit free right after the holder died: %v", err)
		}
		start := time.Now()
		p, err := s.TryAcquire(ctx, 3, 4*lease)
		if err != nil {
			t.Fatalf("permits not back after the dead holder's lease: %v", err)
		}
		t.Logf("3 permits back %v after the holder died (lease %v)", time.Since(start), lease)
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSemaphoreRenewal: a 600ms lease held for 2.4s stays held.
func TestSemaphoreRenewal(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const lease = 1500 * time.Millisecond // renewed every 500ms: survives a 1s stall
		d := semDef(t, 1, lease, true, 0)
		k := key(t)
		p, err := newClient(t, b).Semaphore(d, k).Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		other := newClient(t, b).Semaphore(d, k)
		for range 6 {
			time.Sleep(lease / 2) // three leases in all: renewed past each
			if err := p.Context().Err(); err != nil {
				t.Fatalf("permit lost: %v", context.Cause(p.Context()))
			}
			if _, err := other.TryAcquire(ctx, 1, 0); !errors.Is(err, lockrt.ErrNotObtained) {
				t.Fatalf("another client got the permit: %v", err)
			}
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSemaphoreReleaseWakesWaiter: a waiter wakes on the release message,
// not when the holder's 30s lease would have run out.
func TestSemaphoreReleaseWakesWaiter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := semDef(t, 1, 30*time.Second, true, time.Minute)
		k := key(t)
		p, err := newClient(t, b).Semaphore(d, k).Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		wc := newClient(t, b)
		waiter := wc.Semaphore(d, k)
		got := make(chan time.Time, 1)
		go func() {
			p, err := waiter.Acquire(ctx, 1)
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- time.Now()
			p.Release(ctx)
		}()
		waitWaiting(t, wc, k, 1, 1)
		released := time.Now()
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at, ok := <-got:
			if ok {
				t.Logf("waiter got the permit %v after the release", at.Sub(released))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by the release")
		}
	})
}

// TestSemaphoreErrors: asking more than the capacity fails at once, a
// double release and a lost permit are sentinel errors.
func TestSemaphoreErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := semDef(t, 2, 900*time.Millisecond, true, time.Minute)
		c := newClient(t, b)
		s := c.Semaphore(d, key(t))
		start := time.Now()
		if _, err := s.Acquire(ctx, 3); !errors.Is(err, lockrt.ErrTooManyPermits) {
			t.Fatalf("3 of 2 permits: err = %v, want ErrTooManyPermits", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("ErrTooManyPermits after %v, want at once", d)
		}
		if _, err := s.Acquire(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("0 permits: err = %v, want ErrInvalidArgument", err)
		}
		if _, err := s.TryAcquire(ctx, 1, -time.Second); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("negative wait: err = %v, want ErrInvalidArgument", err)
		}

		p, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Release(ctx); !errors.Is(err, lockrt.ErrPermitNotHeld) || !errors.Is(err, lockrt.ErrNotHeld) {
			t.Fatalf("second release: err = %v, want ErrPermitNotHeld", err)
		}
		if cause := context.Cause(p.Context()); !errors.Is(cause, context.Canceled) {
			t.Fatalf("released permit's context: cause %v, want context.Canceled", cause)
		}

		// An operator deletes the holds: the holder learns it at the next
		// renewal (lease/3).
		p, err = s.Acquire(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Redis().Del(ctx, s.Key()).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatal("permit context not cancelled after its hold was deleted")
		}
		if cause := context.Cause(p.Context()); !errors.Is(cause, lockrt.ErrPermitLost) || !errors.Is(cause, lockrt.ErrLockLost) {
			t.Fatalf("lost permit's context: cause %v, want ErrPermitLost", cause)
		}
		if err := p.Release(ctx); !errors.Is(err, lockrt.ErrPermitLost) {
			t.Fatalf("release of a lost permit: err = %v, want ErrPermitLost", err)
		}

		// Waiting runs out.
		p, err = s.Acquire(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		if _, err := s.TryAcquire(ctx, 1, 100*time.Millisecond); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("wait ran out: err = %v, want ErrNotObtained", err)
		}
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := s.Acquire(dctx, 1); !errors.Is(err, lockrt.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("context deadline: err = %v, want ErrNotObtained and DeadlineExceeded", err)
		}
	})
}

// TestSemaphoreFixedLease: with renew: false the permit's context ends
// with its lease, and the permits come back to others then.
func TestSemaphoreFixedLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const lease = 300 * time.Millisecond
		d := semDef(t, 1, lease, false, time.Second)
		k := key(t)
		p, err := newClient(t, b).Semaphore(d, k).Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Context().Done():
		case <-time.After(10 * lease):
			t.Fatal("fixed-lease permit's context did not end")
		}
		if cause := context.Cause(p.Context()); !errors.Is(cause, lockrt.ErrPermitLost) {
			t.Fatalf("cause = %v, want ErrPermitLost", cause)
		}
		q, err := newClient(t, b).Semaphore(d, k).Acquire(ctx, 1)
		if err != nil {
			t.Fatalf("permit not back after a fixed lease: %v", err)
		}
		q.Release(ctx)
	})
}

// TestSemaphoreCapacity: the spec's capacity applies until an operator
// sets another; raising it wakes waiters, lowering it fails waiters that
// ask for more.
func TestSemaphoreCapacity(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := semDef(t, 2, 30*time.Second, true, time.Minute)
		k := key(t)
		admin := newClient(t, b).Semaphore(d, k)
		if n, err := admin.Capacity(ctx); err != nil || n != 2 {
			t.Fatalf("Capacity = %d, %v; want the spec's 2", n, err)
		}
		p, err := admin.Acquire(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		wc := newClient(t, b)
		waiter := wc.Semaphore(d, k)
		errs := make(chan error, 2)
		go func() {
			p, err := waiter.Acquire(ctx, 1)
			if err == nil {
				p.Release(ctx)
			}
			errs <- err
		}()
		waitWaiting(t, wc, k, 1, 1)
		if n, err := admin.AddPermits(ctx, 1); err != nil || n != 3 {
			t.Fatalf("AddPermits(1) = %d, %v; want 3", n, err)
		}
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("waiter after the capacity grew: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken when the capacity grew")
		}
		// A waiter for 3 fails at once when the capacity drops to 2.
		go func() {
			_, err := waiter.Acquire(ctx, 3)
			errs <- err
		}()
		waitWaiting(t, wc, k, 1, 1)
		if err := admin.SetPermits(ctx, 2); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errs:
			if !errors.Is(err, lockrt.ErrTooManyPermits) {
				t.Fatalf("waiter for 3 after the capacity dropped to 2: %v, want ErrTooManyPermits", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter for more than the new capacity not failed")
		}
		if _, err := admin.AddPermits(ctx, -2); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("capacity 0: err = %v, want ErrInvalidArgument", err)
		}
		if err := admin.SetPermits(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("SetPermits(0): err = %v, want ErrInvalidArgument", err)
		}
		if err := admin.SetPermits(ctx, 5); err != nil {
			t.Fatal(err)
		}
		if n, err := admin.Available(ctx); err != nil || n != 3 {
			t.Fatalf("Available = %d, %v; want 3", n, err)
		}
		if err := admin.ResetPermits(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := admin.Capacity(ctx); err != nil || n != 2 {
			t.Fatalf("Capacity after ResetPermits = %d, %v; want 2", n, err)
		}
	})
}

// TestSemaphoreKeysExpire: the keys of a semaphore live no longer than
// its holds, and are gone once every permit is released; also the
// compact single hold's (the counts alone) and the full form's.
func TestSemaphoreKeysExpire(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := semDef(t, 2, 5*time.Second, true, 0)
		c := newClient(t, b)
		s := c.Semaphore(d, key(t))
		rdb := c.Redis()
		within := func(ks ...string) {
			t.Helper()
			for _, k := range ks {
				if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > 5*time.Second {
					t.Errorf("PTTL %s = %v, %v; want within the lease", k, ttl, err)
				}
			}
		}
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		within(s.Key() + ":counts")
		if n, err := rdb.Exists(ctx, s.Key()).Result(); err != nil || n != 0 {
			t.Errorf("the compact single hold has a holds key (%d, %v)", n, err)
		}
		p2, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		within(s.Key(), s.Key()+":counts")
		for _, p := range []*lockrt.Permit{p, p2} {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := rdb.Exists(ctx, s.Key(), s.Key()+":counts", s.Key()+":capacity").Result(); err != nil || n != 0 {
			t.Errorf("%d keys left after the last release, %v", n, err)
		}
		p, err = s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := rdb.Exists(ctx, s.Key(), s.Key()+":counts", s.Key()+":capacity").Result(); err != nil || n != 0 {
			t.Errorf("%d keys left after the compact hold's release, %v", n, err)
		}
	})
}

// TestSemaphoreRoundTrips: an uncontended Acquire and Release take one
// round trip each, and Available one.
func TestSemaphoreRoundTrips(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		rdb := b.new()
		defer rdb.Close()
		c := lockrt.New(rdb)
		defer c.Close()
		d := semDef(t, 3, 5*time.Second, true, 0)
		sc := d.Scripts
		if err := c.Preload(ctx, sc.Acquire, sc.Release, sc.Renew, sc.State, sc.Capacity); err != nil {
			t.Fatal(err)
		}
		h := &countHook{}
		rdb.AddHook(h)
		s := c.Semaphore(d, key(t))
		for i := range 10 {
			p, err := s.Acquire(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if got := h.n.Load(); got != int64(2*(i+1)) {
				t.Fatalf("after %d Acquire+Release: %d round trips, want %d", i+1, got, 2*(i+1))
			}
		}
		before := h.n.Load()
		if _, err := s.Available(ctx); err != nil {
			t.Fatal(err)
		}
		if got := h.n.Load() - before; got != 1 {
			t.Fatalf("Available: %d round trips, want 1", got)
		}
	})
}
