package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
)

// fairDef returns a fair lock definition with the given waiter TTL.
func fairDef(t testing.TB, lease time.Duration, wait, waiterTTL time.Duration) *lockrt.LockDef {
	d := def(t, lockrt.Fair, lease, true, wait)
	d.WaiterTTL = waiterTTL
	return d
}

// evalCounter counts the scripts a client ran (once they replied).
type evalCounter struct{ n atomic.Int64 }

func (h *evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
		return err
	}
}
func (h *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestFairOrder: 8 waiters (on 4 clients) queued in a known order get the
// lock in that order, and each release hands it to the first waiter: the
// whole hand-off costs at most one acquire (the hand-off needs none) and
// one release per waiter.
func TestFairOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const waiters = 8
		ctx := context.Background()
		// A long waiter TTL: no refreshes during the test, so every
		// script run is counted.
		d := fairDef(t, 10*time.Second, time.Minute, time.Minute)
		k := key(t)
		holder := newClient(t, b)
		le, err := holder.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		counter := &evalCounter{}
		var clients []*lockrt.Client
		for range waiters / 2 {
			rdb := b.new()
			t.Cleanup(func() { rdb.Close() })
			rdb.AddHook(counter)
			c := lockrt.New(rdb)
			t.Cleanup(func() { c.Close() })
			clients = append(clients, c, c)
		}
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				le, err := c.Lock(d, k).Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				if err := le.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
			waitQueued(t, holder.Redis(), k, int64(i+1))
		}
		before := counter.n.Load()
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for i, got := range order {
			if got != i {
				t.Fatalf("acquisition order %v, want arrival order", order)
			}
		}
		if len(order) != waiters {
			t.Fatalf("%d of %d waiters got the lock", len(order), waiters)
		}
		if runs := counter.n.Load() - before; runs < waiters || costsChecked && runs > 2*waiters {
			t.Errorf("hand-off ran %d scripts, want %d to %d (a release and at most one acquire per waiter)", runs, waiters, 2*waiters)
		}
		if n := queueLen(t, holder.Redis(), k); n != 0 {
			t.Errorf("queue length %d after everyone was served", n)
		}
	})
}

// TestFairDeadWaiter: a waiter that dies while first in the queue is
// passed over: when its deadline passes before the release, the release
// hands the lock to the next waiter; when a release hands it the lock
// before that, the next waiter gets it once the hand-off's lease runs
// out. A live waiter keeps its place for longer than its TTL by
// refreshing it.
func TestFairDeadWaiter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const ttl = 600 * time.Millisecond
		const deadTTL = 2 * time.Second
		d := fairDef(t, 10*time.Second, 30*time.Second, ttl)
		k := key(t)
		holder := newClient(t, b)
		le, err := holder.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The dead waiter queued once, with its own TTL, and never came
		// back: exactly what the acquire script sees of a crashed one.
		rdb := holder.Redis()
		fairKeys := []string{k, keys.Sub(k, "queue"), keys.Sub(k, "waiters")}
		src := script(t, "fair_acquire").Source
		if err := rdb.Eval(ctx, src, fairKeys, 10000, "dead:1", deadTTL.Milliseconds(), "0", keys.Sub(k, "ch"), "publish", 1000).Err(); err != nil {
			t.Fatal(err)
		}
		queuedDead := time.Now()
		got := make(chan time.Time, 1)
		go func() {
			le, err := newClient(t, b).Lock(d, k).Lock(ctx)
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- time.Now()
			le.Unlock(ctx)
		}()
		waitQueued(t, rdb, k, 2)
		// Held for longer than the live waiter's TTL: it must keep its
		// place by refreshing.
		time.Sleep(2 * ttl)
		if n := queueLen(t, rdb, k); n != 2 {
			t.Fatalf("queue length %d while the holder holds, want 2", n)
		}
		released := time.Now()
		if err := le.Unlock(ctx); err != nil { // hands the lock to the dead waiter
			t.Fatal(err)
		}
		at, ok := <-got
		if !ok {
			return
		}
		waited := at.Sub(released)
		t.Logf("next waiter served %v after the release handed the lock to the dead one (hand-off lease %v)", waited, lockrt.HandoffLease)
		if waited > lockrt.HandoffLease+2*time.Second {
			t.Errorf("served %v after the release: long after the hand-off's lease %v", waited, lockrt.HandoffLease)
		}
		if at.Sub(queuedDead) < 0 {
			t.Error("served before the dead waiter queued")
		}
	})
}

// TestFairGiveUp: a waiter that gives up leaves the queue at once, and the
// next waiter is woken by the release rather than at its deadline; a
// TryLock that does not wait never queues.
func TestFairGiveUp(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := fairDef(t, 10*time.Second, 30*time.Second, 30*time.Second)
		k := key(t)
		holder := newClient(t, b)
		le, err := holder.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		other := newClient(t, b)
		if _, err := other.Lock(d, k).TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("TryLock(0) on a held lock: %v", err)
		}
		if n := queueLen(t, holder.Redis(), k); n != 0 {
			t.Fatalf("queue length %d after TryLock(0), want 0", n)
		}
		if _, err := other.Lock(d, k).TryLock(ctx, 200*time.Millisecond); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("TryLock(200ms) on a held lock: %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() {
			_, err := other.Lock(d, k).Lock(cctx)
			done <- err
		}()
		waitQueued(t, holder.Redis(), k, 1)
		cancel()
		if err := <-done; !errors.Is(err, lockrt.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v", err)
		}
		if n := queueLen(t, holder.Redis(), k); n != 0 {
			t.Fatalf("queue length %d after the waiters gave up, want 0", n)
		}
		// With a 30 s waiter TTL, a waiter left behind would hold the
		// next one up for 30 s.
		got := make(chan time.Duration, 1)
		go func() {
			le, err := other.Lock(d, k).Lock(ctx)
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- 0
			le.Unlock(ctx)
		}()
		waitQueued(t, holder.Redis(), k, 1)
		released := time.Now()
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			t.Logf("next waiter served %v after the release", time.Since(released))
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not served within 5s of the release")
		}
	})
}

// TestFairReentryAndExclusion: re-entry skips the queue; 4 clients x 2
// goroutines x 50 critical sections never overlap.
func TestFairReentryAndExclusion(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := fairDef(t, 5*time.Second, time.Minute, 0)
		k := key(t)
		c := newClient(t, b)
		le, err := c.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waiting := make(chan error)
		go func() {
			le, err := newClient(t, b).Lock(d, k).Lock(ctx)
			if err == nil {
				err = le.Unlock(ctx)
			}
			waiting <- err
		}()
		waitQueued(t, c.Redis(), k, 1)
		again, err := c.Lock(d, k).TryLock(le.Context(), 0)
		if err != nil {
			t.Fatalf("re-entry with a waiter queued: %v", err)
		}
		if err := again.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-waiting; err != nil {
			t.Fatal(err)
		}

		var inside, overlaps, done atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			c := newClient(t, b)
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 50 {
						le, err := c.Lock(d, k).Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						done.Add(1)
						inside.Add(-1)
						if err := le.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		if overlaps.Load() != 0 || done.Load() != 400 {
			t.Fatalf("%d overlaps in %d critical sections", overlaps.Load(), done.Load())
		}
		if n := queueLen(t, c.Redis(), k); n != 0 {
			t.Fatalf("queue length %d at the end", n)
		}
		// ForceUnlock wakes the first waiter.
		if le, err = c.Lock(d, k).Lock(ctx); err != nil {
			t.Fatal(err)
		}
		go func() {
			le, err := newClient(t, b).Lock(d, k).Lock(ctx)
			if err == nil {
				err = le.Unlock(ctx)
			}
			waiting <- err
		}()
		waitQueued(t, c.Redis(), k, 1)
		if ok, err := c.Lock(d, k).ForceUnlock(ctx); err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		select {
		case err := <-waiting:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("waiter not woken by ForceUnlock")
		}
	})
}

// TestKindRoundTrips: for fair, fenced and read-write locks too, an
// uncontended Lock and Unlock take one round trip each once the scripts
// are loaded, and so does a fair re-entry.
func TestKindRoundTrips(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		rdb := b.new()
		defer rdb.Close()
		c := lockrt.New(rdb)
		defer c.Close()
		fair := def(t, lockrt.Fair, 5*time.Second, true, 0)
		fenced := def(t, lockrt.Fenced, 5*time.Second, true, 0)
		rw := def(t, lockrt.ReadWrite, 5*time.Second, true, 0)
		for _, d := range []*lockrt.LockDef{fair, fenced, rw} {
			s := d.Scripts
			all := []*lockrt.Script{s.Acquire, s.Release, s.Renew, s.ForceUnlock}
			if err := c.Preload(ctx, all...); err != nil {
				t.Fatal(err)
			}
		}
		h := &countHook{}
		rdb.AddHook(h)
		check := func(what string, want int64) {
			t.Helper()
			if got := h.n.Swap(0); got != want {
				t.Fatalf("%s: %d round trips, want %d", what, got, want)
			}
		}
		locks := map[string]*lockrt.Lock{
			"fair":   c.Lock(fair, key(t, "fair")),
			"fenced": c.Lock(fenced, key(t, "fenced")),
			"read":   c.RWLock(rw, key(t, "rw")).Read(),
			"write":  c.RWLock(rw, key(t, "rw")).Write(),
		}
		for name, l := range locks {
			for range 3 {
				le, err := l.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				check(name+" Lock", 1)
				again, err := l.Lock(le.Context())
				if err != nil {
					t.Fatal(err)
				}
				check(name+" re-entry", 1)
				if err := again.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := le.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				check(name+" 2 x Unlock", 2)
			}
		}
	})
}
