//go:build costs

package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestLatchAwaitCost: 200 goroutines of one client awaiting one latch
// share their reads of its count (latchReads): before it subscribes, once
// subscribed, and when the last count-down wakes them all, a read answers
// every goroutine that asked before it was sent; on their fallback timers,
// a read sent since a waiter's own last one answers it; and a waiter that
// finds the channel subscribed by another checks once, joined, not before
// too. The waiters start over a second: each costs one GET to start, and
// their timers and the opening a few in all, where each Await sent its
// own (5 each: one before, one after subscribing, two on its timer in the
// window, one when woken). A tolerance, since how many reads a burst
// takes depends on how the goroutines are scheduled: a cost test (make
// costs).
func TestLatchAwaitCost(t *testing.T) {
	t.Parallel()
	const n = 200
	ctx := context.Background()
	c, h := countedClient(t, backends()[0])
	other := newClient(t, backends()[0])
	d, k := latchDef(t, 1, time.Hour), key(t)
	before := h.Snapshot()["get"]
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- c.Latch(d, k).Await(ctx) })
		// Pacing: the waiters start over a second, so that their
		// fallback timers fire apart, not in one burst.
		time.Sleep(5 * time.Millisecond)
	}
	eventually(t, failAfter, func() bool { return lockrt.Joined(c, keys.Sub(k, "ch")) == n },
		fmt.Sprintf("not all %d goroutines await %s", n, k))
	waiting := h.Snapshot()["get"] - before
	// The window counted: each waiter's fallback timer (Latch.Await: 1 s,
	// then 2 s more) fires twice in it, and half a second is spared.
	time.Sleep(time.Second + 2*time.Second + time.Second/2)
	polls := h.Snapshot()["get"] - before - waiting
	if _, err := other.Latch(d, k).CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	woken := h.Snapshot()["get"] - before - waiting - polls
	t.Logf("%d goroutines awaiting one latch: %d GETs until all waited, %d on their timers in 3.5 s, %d when it opened (each alone: %d, %d, %d)",
		n, waiting, polls, woken, 2*n, 2*n, n)
	if waiting > n+n/10 {
		t.Errorf("%d GETs until %d goroutines waited, want at most %d: one each once the channel is subscribed", waiting, n, n+n/10)
	}
	if polls > n/10 {
		t.Errorf("%d GETs on the timers of %d awaiting goroutines in 3.5 s, want at most %d", polls, n, n/10)
	}
	if woken > n/10 {
		t.Errorf("%d GETs when the latch opened for %d awaiting goroutines, want at most %d", woken, n, n/10)
	}
}
