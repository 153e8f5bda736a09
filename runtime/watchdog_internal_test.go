package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testHolder is a holder whose hold can start young, as a Lease.
type testHolder struct {
	mu       sync.Mutex
	cause    error
	ended    chan struct{}
	deadline time.Time
	young    youngHold
	// what promoted tells (set by addYoung)
	k     heldKey
	r     renewal
	start time.Time
}

func newTestHolder() *testHolder { return &testHolder{ended: make(chan struct{})} }

func (h *testHolder) cancel(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cause == nil {
		h.cause = cause
		close(h.ended)
	}
}

func (h *testHolder) extend(until time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deadline = until
	return h.cause == nil
}

func (h *testHolder) youngNode() *youngHold { return &h.young }

func (h *testHolder) promoted() (heldKey, renewal, time.Time) { return h.k, h.r, h.start }

// addYoung is addNew for a testHolder of hold k.
func (w *watchdog) addYoung(k heldKey, r renewal, h *testHolder, start time.Time) error {
	h.k, h.r, h.start = k, r, start
	return w.addNew(r, h, start)
}

// counts returns how many holds the watchdog keeps young, in entries, and
// in each heap.
func (w *watchdog) counts() (young, entries, queue, expiries int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for y := w.young.head; y != nil; y = y.next {
		young++
	}
	return young, len(w.entries), len(w.queue), len(w.expiries)
}

// TestWatchdogYoung: a hold of a new owner (addNew) stays out of the
// watchdog's map and heaps until its goroutine next looks, so that a
// Lock+Unlock costs a link and an unlink; a re-entry (add of the same
// hold) joins it; the goroutine promotes it before renewing it.
func TestWatchdogYoung(t *testing.T) {
	renewals := make(chan heldKey, 16)
	w := newWatchdogFunc(func(_ context.Context, batch []*held, _ time.Time) {
		for _, h := range batch {
			h.outcome = renewed
			renewals <- h.k
		}
	})
	defer w.close()
	r := renewal{Lease: time.Minute}
	a, b := newTestHolder(), newTestHolder()
	ka := heldKey{"lock:a", "o1"}
	start := time.Now()
	if err := w.addYoung(ka, r, a, start); err != nil {
		t.Fatal(err)
	}
	if y, e, q, x := w.counts(); y != 1 || e != 0 || q != 0 || x != 0 {
		t.Fatalf("after addNew: %d young, %d entries, %d queued, %d expiries; want 1, 0, 0, 0", y, e, q, x)
	}
	w.remove(ka, a)
	if y, e, q, x := w.counts(); y+e+q+x != 0 {
		t.Fatalf("after its remove: %d young, %d entries, %d queued, %d expiries; want none", y, e, q, x)
	}

	// A re-entry finds the young hold and shares it.
	if err := w.addYoung(ka, r, a, start); err != nil {
		t.Fatal(err)
	}
	if err := w.add(ka, r, b, start); err != nil {
		t.Fatal(err)
	}
	if y, e, q, x := w.counts(); y != 0 || e != 1 || q != 1 || x != 1 {
		t.Fatalf("after a re-entry: %d young, %d entries, %d queued, %d expiries; want 0, 1, 1, 1", y, e, q, x)
	}
	if h := w.entries[ka]; len(h.holders) != 2 {
		t.Fatalf("the re-entered hold has %d holders, want 2", len(h.holders))
	}
	w.remove(ka, a)
	w.remove(ka, b)
	if y, e, q, x := w.counts(); y+e+q+x != 0 {
		t.Fatalf("after both removes: %d young, %d entries, %d queued, %d expiries; want none", y, e, q, x)
	}

	// A young hold still held when its renewal is due is renewed.
	kc, c := heldKey{"lock:c", "o2"}, newTestHolder()
	if err := w.addYoung(kc, renewal{Lease: 90 * time.Millisecond}, c, time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-renewals:
		if k != kc {
			t.Fatalf("renewed %v, want %v", k, kc)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a young hold was not renewed")
	}
	w.remove(kc, c)
}

// TestWatchdogPromoteChunks: young holds move into the watchdog's index at
// most promoteChunk under one hold of its mutex, so that a client that
// took many locks since the watchdog last looked does not stall its own
// calls while they move; promote moves them all, a chunk at a time.
func TestWatchdogPromoteChunks(t *testing.T) {
	w := newWatchdogFunc(func(context.Context, []*held, time.Time) {})
	defer w.close()
	const n = 2*promoteChunk + 100
	start := time.Now()
	for i := range n {
		k := heldKey{fmt.Sprintf("lock:%d", i), "o"}
		if err := w.addYoung(k, renewal{Lease: time.Minute}, newTestHolder(), start); err != nil {
			t.Fatal(err)
		}
	}
	w.mu.Lock()
	done := w.promoteSome(promoteChunk)
	w.mu.Unlock()
	if y, e, q, x := w.counts(); done || y != n-promoteChunk || e != promoteChunk || q != promoteChunk || x != promoteChunk {
		t.Fatalf("after one chunk: done %v, %d young, %d entries, %d queued, %d expiries; want false, %d young and %d in each index", done, y, e, q, x, n-promoteChunk, promoteChunk)
	}
	w.mu.Lock()
	w.promote()
	w.mu.Unlock()
	if y, e, q, x := w.counts(); y != 0 || e != n || q != n || x != n {
		t.Fatalf("after promote: %d young, %d entries, %d queued, %d expiries; want 0 and %d in each index", y, e, q, x, n)
	}
}

// TestWatchdogYoungExpires: a young hold's local expiry ends its holder
// with ErrLockLost although the watchdog's goroutine, stuck in another
// hold's renewal, never looked at it: the expiry timer promotes the young
// holds before it looks.
func TestWatchdogYoungExpires(t *testing.T) {
	stuck, unstick := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w := newWatchdogFunc(func(_ context.Context, batch []*held, _ time.Time) {
		once.Do(func() { close(stuck) })
		<-unstick // Redis does not answer
		for _, h := range batch {
			h.outcome = again
		}
	})
	defer w.close()
	defer close(unstick)
	long := newTestHolder()
	if err := w.addYoung(heldKey{"lock:long", "o1"}, renewal{Lease: 30 * time.Millisecond}, long, time.Now()); err != nil {
		t.Fatal(err)
	}
	<-stuck // the goroutine is in long's renewal
	young := newTestHolder()
	start, lease := time.Now(), 200*time.Millisecond
	if err := w.addYoung(heldKey{"lock:young", "o2"}, renewal{Lease: lease}, young, start); err != nil {
		t.Fatal(err)
	}
	select {
	case <-young.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a young hold outlived its local expiry while the watchdog's goroutine was stuck")
	}
	if !errors.Is(young.cause, ErrLockLost) {
		t.Fatalf("the young hold ended with %v, want ErrLockLost", young.cause)
	}
	if at := time.Since(start); at < lease {
		t.Fatalf("the young hold ended %v after it was taken, before its lease of %v", at, lease)
	}
}

// TestWatchdogRenewalRacingRelease: a renewal whose reply comes after its
// hold was given up (Unlock ends the hold's context, then leaves the
// watchdog) does not report the hold lost: no EventLeaseLost for a hold
// released normally. It failed before hold.extend told a hold given up
// from one whose deadline passed (a spurious lease-lost in TestObserver
// under load).
func TestWatchdogRenewalRacingRelease(t *testing.T) {
	inRenew, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w := newWatchdogFunc(func(_ context.Context, batch []*held, _ time.Time) {
		once.Do(func() { close(inRenew) })
		<-proceed
		for _, h := range batch {
			h.outcome = renewed
		}
	})
	defer w.close()
	var lostEvents atomic.Int64
	w.observe = func(_ context.Context, e Event) {
		if e.Kind == EventLeaseLost {
			lostEvents.Add(1)
		}
	}
	lease, start := 90*time.Millisecond, time.Now()
	h := &hold{}
	h.start(context.Background(), acquireOptions{lease: lease}, start, true, ErrLockLost)
	k := heldKey{"lock:racing", "o1"}
	if err := w.add(k, renewal{Object: "Racing", Lease: lease}, h, start); err != nil {
		t.Fatal(err)
	}
	<-inRenew // its renewal is in flight
	if lost, ok := h.giveUp(); lost || !ok {
		t.Fatalf("giveUp: lost %v, ok %v; want a live hold given up", lost, ok)
	}
	close(proceed)
	// The watchdog handles the reply before the release leaves it: wait
	// until it did (the hold back in the queue, or dropped as lost).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, e, q, _ := w.counts(); e == 0 || q == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watchdog never handled the renewal's reply")
		}
	}
	if n := lostEvents.Load(); n != 0 {
		t.Fatalf("%d lease-lost events for a hold given up while its renewal was in flight, want 0", n)
	}
	w.remove(k, h)
	if y, e, q, x := w.counts(); y+e+q+x != 0 {
		t.Fatalf("after its remove: %d young, %d entries, %d queued, %d expiries; want none", y, e, q, x)
	}
}

// BenchmarkWatchdogPromote: what moving young holds into the watchdog's
// index costs under its mutex, for 50 000 holds taken since the watchdog
// last looked: all at once, and promoteChunk at a time (the longest
// chunk), as promote does.
//
//	go test -run '^$' -bench WatchdogPromote -benchtime 5x ./runtime/
func BenchmarkWatchdogPromote(b *testing.B) {
	const n = 50000
	keys := make([]heldKey, n)
	for i := range keys {
		keys[i] = heldKey{fmt.Sprintf("lock:%d", i), "o"}
	}
	fill := func(w *watchdog) {
		start := time.Now()
		for _, k := range keys {
			if err := w.addYoung(k, renewal{Lease: time.Minute}, newTestHolder(), start); err != nil {
				b.Fatal(err)
			}
		}
	}
	var all, chunk time.Duration
	for b.Loop() {
		b.StopTimer()
		w := newWatchdogFunc(func(context.Context, []*held, time.Time) {})
		fill(w)
		b.StartTimer()
		w.mu.Lock()
		t := time.Now()
		w.promoteSome(math.MaxInt)
		all += time.Since(t)
		w.mu.Unlock()
		b.StopTimer()
		w.close()
		w = newWatchdogFunc(func(context.Context, []*held, time.Time) {})
		fill(w)
		var longest time.Duration
		for done := false; !done; {
			w.mu.Lock()
			t := time.Now()
			done = w.promoteSome(promoteChunk)
			longest = max(longest, time.Since(t))
			w.mu.Unlock()
		}
		chunk += longest
		w.close()
		b.StartTimer()
	}
	b.ReportMetric(float64(all)/float64(b.N)/float64(time.Millisecond), "ms-all-at-once")
	b.ReportMetric(float64(chunk)/float64(b.N)/float64(time.Microsecond), "µs-longest-chunk")
}
