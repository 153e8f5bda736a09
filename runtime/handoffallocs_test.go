package runtime_test

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// handoffAllocsBudget bounds the allocations of one hand-off, in the whole
// process: the holder's Unlock (its release script, which hands the lock
// to the waiter and publishes to it), the waiter's hub receiving the
// message and waking it, and the waiter's Lock returning its lease
// (leaving its channel's queue included). 22 measured since the third
// session of 2026-11-26 (23 before), with slack 2. A holder that took the lock by the acquire's fast path sends
// its release twice when a waiter is due the lock (first with the lock's
// key alone, see releaseHold): handoffFastExtra more.
const (
	handoffAllocsBudget = 24
	handoffFastExtra    = 8
)

// TestHandoffAllocs counts the allocations of hand-offs between two
// clients of one Redis, each lease handed on to a waiter of the other
// client, and fails when the median of 15 (holds that were themselves
// handed, as under contention) is above handoffAllocsBudget, or the
// median of 5 hand-offs from holds the fast path took (the first of a
// contended spell) is above that plus handoffFastExtra.
func TestHandoffAllocs(t *testing.T) {
	b := backends()[0]
	ctx := context.Background()
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	k := key(t)
	locks := [2]*lockrt.Lock{newClient(t, b).Lock(d, k), newClient(t, b).Lock(d, k)}
	// handOn hands held, a lease of locks[from], to a waiter of the other
	// client, and returns the waiter's lease and the allocations counted.
	handOn := func(held *lockrt.Lease, from int) (*lockrt.Lease, float64) {
		got := inBackground(t, func() (*lockrt.Lease, error) { return locks[1-from].Lock(ctx) })
		time.Sleep(50 * time.Millisecond) // the waiter registers, subscribes and sleeps
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		le := <-got
		runtime.ReadMemStats(&after)
		if le == nil {
			t.FailNow()
		}
		return le, float64(after.Mallocs - before.Mallocs)
	}
	median := func(xs []float64) float64 {
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	var handed, fast []float64
	for range 3 { // warm both clients up (subscriptions, pools), then measure
		held, err := locks[0].Lock(ctx) // the fast path: nobody waits yet
		if err != nil {
			t.Fatal(err)
		}
		held, _ = handOn(held, 0)
		held, _ = handOn(held, 1)
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held, err := locks[0].Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 15 {
		var n float64
		held, n = handOn(held, i%2)
		handed = append(handed, n)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		held, err := locks[0].Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held, n := handOn(held, 0)
		fast = append(fast, n)
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m, f := median(handed), median(fast)
	t.Logf("allocations per hand-off: median %.0f (min %.0f, max %.0f); from a fast-path hold, median %.0f (min %.0f, max %.0f)", m, handed[0], handed[len(handed)-1], f, fast[0], fast[len(fast)-1])
	if m > handoffAllocsBudget {
		t.Errorf("%.0f allocations per hand-off, want at most %d", m, handoffAllocsBudget)
	}
	if f > handoffAllocsBudget+handoffFastExtra {
		t.Errorf("%.0f allocations per hand-off from a fast-path hold, want at most %d", f, handoffAllocsBudget+handoffFastExtra)
	}
}
