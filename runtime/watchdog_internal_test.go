package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// holdHolder is a bare hold as the watchdog sees it.
type holdHolder hold

func (h *holdHolder) Cancel(cause error)          { (*hold)(h).cancel(cause) }
func (h *holdHolder) Extend(until time.Time) bool { return (*hold)(h).extend(until) }

// TestWatchdogRenewalRacingRelease: a Renewal whose reply comes after its
// hold was given up (Unlock ends the hold's context, then leaves the
// watchdog) does not report the hold lost: no EventLeaseLost for a hold
// released normally. It failed before hold.extend told a hold given up
// from one whose deadline passed (a spurious lease-lost in TestObserver
// under load).
func TestWatchdogRenewalRacingRelease(t *testing.T) {
	inRenew, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w := watchdog.New(func(_ context.Context, batch []*watchdog.Held, _ time.Time) {
		once.Do(func() { close(inRenew) })
		<-proceed
		for _, h := range batch {
			h.Outcome = watchdog.Renewed
		}
	})
	defer w.Close()
	var lostEvents atomic.Int64
	w.OnLost = func(string, error) { lostEvents.Add(1) }
	lease, start := 90*time.Millisecond, time.Now()
	h := &hold{}
	h.start(context.Background(), acquireOptions{lease: lease}, start, true, ErrLockLost)
	k := watchdog.Key{Key: "lock:racing", Owner: "o1"}
	if err := w.Add(k, watchdog.Renewal{Object: "Racing", Lease: lease}, (*holdHolder)(h), start); err != nil {
		t.Fatal(err)
	}
	<-inRenew // its Renewal is in flight
	if lost, ok := h.giveUp(); lost || !ok {
		t.Fatalf("giveUp: lost %v, ok %v; want a live hold given up", lost, ok)
	}
	close(proceed)
	// The watchdog handles the reply before the release leaves it: wait
	// until it did (the hold back in the queue, or dropped as lost).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, e, q, _ := w.Counts(); e == 0 || q == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watchdog never handled the Renewal's reply")
		}
	}
	if n := lostEvents.Load(); n != 0 {
		t.Fatalf("%d lease-lost events for a hold given up while its Renewal was in flight, want 0", n)
	}
	w.Remove(k, (*holdHolder)(h))
	if y, e, q, x := w.Counts(); y+e+q+x != 0 {
		t.Fatalf("after its remove: %d young, %d entries, %d queued, %d expiries; want none", y, e, q, x)
	}
}
