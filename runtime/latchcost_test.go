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
// every goroutine that asked before it was sent, so the whole costs a few
// GETs where each Await sent its own (3 each, 600: one before, one after
// subscribing, one when woken). A tolerance, since how many reads a
// burst takes depends on how the goroutines are scheduled: a cost test
// (make costs).
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
	}
	eventually(t, failAfter, func() bool { return lockrt.Joined(c, keys.Sub(k, "ch")) == n },
		fmt.Sprintf("not all %d goroutines await %s", n, k))
	waiting := h.Snapshot()["get"] - before
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
	gets := h.Snapshot()["get"] - before
	t.Logf("%d goroutines awaiting one latch: %d GETs until all waited, %d in all (each alone: %d)", n, waiting, gets, 3*n)
	if gets > n/4 {
		t.Errorf("%d GETs for %d awaiting goroutines, want at most %d", gets, n, n/4)
	}
}
