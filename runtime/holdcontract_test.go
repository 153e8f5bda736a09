package runtime_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestHoldContextContract checks a lease's context against the context
// package's contract, on a real Redis:
//   - children made while the hold is live (context.WithCancel,
//     context.AfterFunc) are cancelled when it is released, and when it is
//     lost, with no goroutine per child (the stdlib finds the hold's
//     cancel-cause context through Value and registers with it);
//   - a Done channel taken before a fixed lease runs out is closed when it
//     does, though nobody calls Err meanwhile, and Err and context.Cause
//     then report the end (ErrLockLost);
//   - Err is nil exactly while Done is open, under concurrent Err, Done,
//     Value and Unlock (run with -race).
func TestHoldContextContract(t *testing.T) {
	b := backends()[0]
	c := newClient(t, b)
	ctx := context.Background()

	// Children of a live hold end with its release, without a goroutine each.
	l := c.Lock(def(t, lockrt.Reentrant, 30*time.Second, true, time.Second), key(t, "released"))
	le, err := l.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hc := le.Context()
	before := runtime.NumGoroutine()
	const children = 100
	var kids []context.Context
	var ran sync.WaitGroup
	for range children {
		kid, cancel := context.WithCancel(hc)
		defer cancel()
		kids = append(kids, kid)
		ran.Add(1)
		context.AfterFunc(hc, ran.Done)
	}
	if n := runtime.NumGoroutine(); n > before+children/10 {
		t.Fatalf("%d goroutines after %d children of a lease's context, %d before: one per child", n, children, before)
	}
	for _, kid := range kids {
		if kid.Err() != nil {
			t.Fatal("a child ended while the hold is live")
		}
	}
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, hc)
	for _, kid := range kids {
		waitDone(t, kid)
		if !errors.Is(kid.Err(), context.Canceled) {
			t.Fatalf("child Err %v after the release", kid.Err())
		}
	}
	ran.Wait()

	// A lost hold ends its children with ErrLockLost as their cause.
	lost := c.Lock(def(t, lockrt.Reentrant, 3*time.Second, true, time.Second), key(t, "lost"))
	le, err = lost.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kid, cancel := context.WithCancel(le.Context())
	defer cancel()
	if _, err := lost.ForceUnlock(ctx); err != nil { // another party takes it away
		t.Fatal(err)
	}
	waitDone(t, kid) // at the next renewal, within lease/3
	if !errors.Is(context.Cause(kid), lockrt.ErrLockLost) || !errors.Is(context.Cause(le.Context()), lockrt.ErrLockLost) {
		t.Fatalf("causes %v / %v, want ErrLockLost", context.Cause(kid), context.Cause(le.Context()))
	}
	_ = le.Unlock(ctx)

	// A fixed lease's Done, taken at once, closes when the lease runs out.
	fixed := c.Lock(def(t, lockrt.Reentrant, 300*time.Millisecond, false, time.Second), key(t, "fixed"))
	le, err = fixed.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := le.Context().Done()
	start := time.Now()
	select {
	case <-done:
		if took := time.Since(start); took < 250*time.Millisecond {
			t.Fatalf("Done closed after %v of a 300ms lease", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Done still open 5s after a 300ms lease ran out")
	}
	if le.Context().Err() == nil || !errors.Is(context.Cause(le.Context()), lockrt.ErrLockLost) {
		t.Fatalf("after the lease: Err %v Cause %v", le.Context().Err(), context.Cause(le.Context()))
	}
	_ = le.Unlock(ctx)

	// Err and Done agree under concurrent use and release.
	for range 20 {
		le, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hc := le.Context()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for range 200 {
					switch g {
					case 0:
						if err := hc.Err(); err != nil {
							select {
							case <-hc.Done():
							default:
								t.Error("Err non-nil while Done is open")
								return
							}
						}
					case 1:
						select {
						case <-hc.Done():
							if hc.Err() == nil {
								t.Error("Done closed while Err is nil")
								return
							}
						default:
						}
					case 2:
						_ = context.Cause(hc)
						_, _ = hc.Deadline()
					}
				}
			})
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		waitDone(t, hc)
	}
}

// waitDone waits up to 10s for ctx's Done to close.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed within 10s")
	}
}

// TestWatchdogLingers: a client that takes and releases a renewed lock
// over and over starts the watchdog's goroutine once, not once per Lock
// (each Unlock leaves the watchdog empty before the next Lock joins it;
// the goroutine stays WatchdogLinger), and once nothing has been held
// for WatchdogLinger the goroutine is gone: at least WatchdogLinger after
// the last Unlock, and at most when its timer fires after that (the first
// hold's renewal, lease/3, when it slept towards it: a release does not
// move the timer).
func TestWatchdogLingers(t *testing.T) {
	c := newClient(t, backends()[0])
	ctx := context.Background()
	const lease = 3 * time.Second
	l := c.Lock(def(t, lockrt.Reentrant, lease, true, time.Second), key(t))
	for range 200 {
		le, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := lockrt.WatchdogStarts(c); n != 1 {
		t.Fatalf("the watchdog's goroutine started %d times in 200 Lock+Unlock cycles, want 1", n)
	}
	if !lockrt.WatchdogRunning(c) {
		t.Fatal("the watchdog's goroutine is gone right after the last Unlock: it does not linger")
	}
	start := time.Now()
	for lockrt.WatchdogRunning(c) {
		if time.Since(start) > lease/3+lockrt.WatchdogLinger+5*time.Second {
			t.Fatalf("the watchdog's goroutine still runs %v after the last Unlock", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := time.Since(start); took < lockrt.WatchdogLinger*3/4 {
		t.Fatalf("the watchdog's goroutine left %v after the last Unlock, want about %v", took, lockrt.WatchdogLinger)
	}
}
