package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// latchDef returns a latch definition built from lockgen's templates.
func latchDef(t testing.TB, count int, expire time.Duration) *lockrt.LatchDef {
	return &lockrt.LatchDef{
		Name: t.Name(), Count: count, Expire: expire,
		Scripts: lockimpl.Scripts().Latches(),
	}
}

// TestLatchWakesAwaiters: a latch of 5 counted down by 5 clients wakes 10
// awaiting clients, each soon after the last count-down.
func TestLatchWakesAwaiters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := latchDef(t, 5, time.Minute)
		k := key(t)
		var wg sync.WaitGroup
		woken := make(chan time.Time, 10)
		var awaiting []*lockrt.Client
		for range 10 {
			c := newClient(t, b)
			awaiting = append(awaiting, c)
			l := c.Latch(d, k)
			wg.Add(1)
			go func() {
				defer wg.Done()
				actx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if err := l.Await(actx); err != nil {
					t.Error(err)
					return
				}
				woken <- time.Now()
			}()
		}
		waitAwaiting(t, k, awaiting...)
		var opened time.Time
		for i := range 5 {
			l := newClient(t, b).Latch(d, k)
			if i == 4 {
				opened = time.Now()
			}
			n, err := l.CountDown(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n != 4-i {
				t.Fatalf("count-down %d left %d, want %d", i+1, n, 4-i)
			}
			if i < 4 {
				select {
				case <-woken:
					t.Fatalf("an awaiter woke at count %d", n)
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		wg.Wait()
		close(woken)
		var latest time.Duration
		count := 0
		for at := range woken {
			count++
			latest = max(latest, at.Sub(opened))
		}
		if count != 10 {
			t.Fatalf("%d awaiters woken, want 10", count)
		}
		// The fallback timer is 1s and more: waking well within it
		// means the message woke them.
		if latest > 900*time.Millisecond {
			t.Errorf("last awaiter woke %v after the last count-down", latest)
		}
		t.Logf("10 awaiters woken within %v of the last count-down", latest)
	})
}

// TestLatchAlreadyOpen: Await on an open latch returns at once, in one
// round trip, without subscribing.
func TestLatchAlreadyOpen(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		rdb := b.new()
		defer rdb.Close()
		c := lockrt.New(rdb)
		defer c.Close()
		l := c.Latch(latchDef(t, 2, time.Minute), key(t))
		for range 2 {
			if _, err := l.CountDown(ctx); err != nil {
				t.Fatal(err)
			}
		}
		h := &countHook{}
		rdb.AddHook(h)
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := l.Await(actx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Await on an open latch took %v", d)
		}
		if got := h.n.Load(); got != 1 {
			t.Errorf("Await on an open latch: %d round trips, want 1", got)
		}
		// Counting down an open latch leaves it open.
		if n, err := l.CountDown(ctx); err != nil || n != 0 {
			t.Fatalf("CountDown of an open latch = %d, %v; want 0", n, err)
		}
		if got := h.n.Load(); got != 2 {
			t.Errorf("CountDown: %d round trips, want 1", got-1)
		}
	})
}

// TestLatchOpensWhileAwaiting: a count-down that lands between Await's
// first check and its subscription is not missed.
func TestLatchOpensWhileAwaiting(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := latchDef(t, 1, time.Minute)
		for i := range 20 {
			k := key(t, string(rune('a'+i)))
			l := newClient(t, b).Latch(d, k)
			done := make(chan error, 1)
			go func() {
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				done <- l.Await(actx)
			}()
			if _, err := newClient(t, b).Latch(d, k).CountDown(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	})
}

// TestLatchCount: TrySetCount, Count and CountDown, and the key's expiry.
func TestLatchCount(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		l := c.Latch(latchDef(t, 3, 10*time.Second), key(t))
		if n, err := l.Count(ctx); err != nil || n != 3 {
			t.Fatalf("Count of an unset latch = %d, %v; want the spec's 3", n, err)
		}
		if ok, err := l.TrySetCount(ctx, 2); err != nil || !ok {
			t.Fatalf("TrySetCount(2) = %v, %v", ok, err)
		}
		if ok, err := l.TrySetCount(ctx, 7); err != nil || ok {
			t.Fatalf("TrySetCount of a set latch = %v, %v; want false", ok, err)
		}
		if _, err := l.TrySetCount(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("TrySetCount(0): err = %v, want ErrInvalidArgument", err)
		}
		if ttl, err := c.Redis().PTTL(ctx, l.Key()).Result(); err != nil || ttl <= 0 || ttl > 10*time.Second {
			t.Fatalf("PTTL = %v, %v; want within the spec's expire", ttl, err)
		}
		for want := 1; want >= 0; want-- {
			if n, err := l.CountDown(ctx); err != nil || n != want {
				t.Fatalf("CountDown = %d, %v; want %d", n, err, want)
			}
		}
		if n, err := l.Count(ctx); err != nil || n != 0 {
			t.Fatalf("Count of an open latch = %d, %v", n, err)
		}
		if ok, err := l.TrySetCount(ctx, 2); err != nil || ok {
			t.Fatalf("TrySetCount of an open latch = %v, %v; want false", ok, err)
		}
	})
}

// TestLatchExpires: an expired latch starts over with the spec's count.
func TestLatchExpires(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const expire = 200 * time.Millisecond
		l := newClient(t, b).Latch(latchDef(t, 1, expire), key(t))
		if n, err := l.CountDown(ctx); err != nil || n != 0 {
			t.Fatalf("CountDown = %d, %v", n, err)
		}
		if n, err := l.Count(ctx); err != nil || n != 0 {
			t.Fatalf("Count = %d, %v; want 0", n, err)
		}
		time.Sleep(2 * expire) // the latch's expiry runs out
		if n, err := l.Count(ctx); err != nil || n != 1 {
			t.Fatalf("Count after the expiry = %d, %v; want the spec's 1", n, err)
		}
	})
}

// TestLatchAwaitEnds: Await ends with the context, and with the client.
func TestLatchAwaitEnds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		k := key(t)
		l := c.Latch(latchDef(t, 1, time.Minute), k)
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if err := l.Await(dctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Await past the deadline: err = %v, want DeadlineExceeded", err)
		}
		done := make(chan error, 1)
		go func() { done <- l.Await(ctx) }()
		waitAwaiting(t, k, c)
		c.Close()
		select {
		case err := <-done:
			if !errors.Is(err, lockrt.ErrClosed) {
				t.Fatalf("Await when the client closed: err = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Await did not end when the client closed")
		}
	})
}

// TestLatchDelete: Delete removes a set latch, which then counts from the
// spec's count again, and reports whether there was one.
func TestLatchDelete(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 10*time.Second)
		l := newClient(t, b).Latch(latchDef(t, 3, time.Minute), key(t))
		if ok, err := l.TrySetCount(ctx, 2); err != nil || !ok {
			t.Fatalf("TrySetCount = %v, %v", ok, err)
		}
		if n, err := l.CountDown(ctx); err != nil || n != 1 {
			t.Fatalf("CountDown = %d, %v; want 1", n, err)
		}
		if ok, err := l.Delete(ctx); err != nil || !ok {
			t.Fatalf("Delete = %v, %v; want true", ok, err)
		}
		if n, err := l.Count(ctx); err != nil || n != 3 {
			t.Errorf("Count after Delete = %d, %v; want the spec's 3", n, err)
		}
		if ok, err := l.Delete(ctx); err != nil || ok {
			t.Errorf("second Delete = %v, %v; want false", ok, err)
		}
	})
}
