package watchdog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// testHolder is a holder whose hold can start young, as a Lease.
type testHolder struct {
	mu       sync.Mutex
	cause    error
	ended    chan struct{}
	deadline time.Time
	young    Young
	// what promoted tells (set by addYoung)
	k     Key
	r     Renewal
	start time.Time
}

func newTestHolder() *testHolder { return &testHolder{ended: make(chan struct{})} }

func (h *testHolder) Cancel(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cause == nil {
		h.cause = cause
		close(h.ended)
	}
}

func (h *testHolder) Extend(until time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deadline = until
	return h.cause == nil
}

func (h *testHolder) YoungNode() *Young { return &h.young }

func (h *testHolder) Promoted() (Key, Renewal, time.Time) { return h.k, h.r, h.start }

// addYoung is addNew for a testHolder of hold k.
func (w *Watchdog) addYoung(k Key, r Renewal, h *testHolder, start time.Time) error {
	h.k, h.r, h.start = k, r, start
	return w.AddNew(r, h, start)
}

// TestWatchdogYoung: a hold of a new owner (addNew) stays out of the
// watchdog's map and heaps until its goroutine next looks, so that a
// Lock+Unlock costs a link and an unlink; a re-entry (add of the same
// hold) joins it; the goroutine promotes it before renewing it.
func TestWatchdogYoung(t *testing.T) {
	renewals := make(chan Key, 16)
	w := New(func(_ context.Context, batch []*Held, _ time.Time) {
		for _, h := range batch {
			h.Outcome = Renewed
			renewals <- h.k
		}
	})
	defer w.Close()
	r := Renewal{Lease: time.Minute}
	a, b := newTestHolder(), newTestHolder()
	ka := Key{"lock:a", "o1"}
	start := time.Now()
	if err := w.addYoung(ka, r, a, start); err != nil {
		t.Fatal(err)
	}
	if y, e, q, x := w.Counts(); y != 1 || e != 0 || q != 0 || x != 0 {
		t.Fatalf("after addNew: %d young, %d entries, %d queued, %d expiries; want 1, 0, 0, 0", y, e, q, x)
	}
	w.Remove(ka, a)
	if y, e, q, x := w.Counts(); y+e+q+x != 0 {
		t.Fatalf("after its remove: %d young, %d entries, %d queued, %d expiries; want none", y, e, q, x)
	}

	// A re-entry finds the young hold and shares it.
	if err := w.addYoung(ka, r, a, start); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(ka, r, b, start); err != nil {
		t.Fatal(err)
	}
	if y, e, q, x := w.Counts(); y != 0 || e != 1 || q != 1 || x != 1 {
		t.Fatalf("after a re-entry: %d young, %d entries, %d queued, %d expiries; want 0, 1, 1, 1", y, e, q, x)
	}
	if h := w.entries[ka]; len(h.holders) != 2 {
		t.Fatalf("the re-entered hold has %d holders, want 2", len(h.holders))
	}
	w.Remove(ka, a)
	w.Remove(ka, b)
	if y, e, q, x := w.Counts(); y+e+q+x != 0 {
		t.Fatalf("after both removes: %d young, %d entries, %d queued, %d expiries; want none", y, e, q, x)
	}

	// A young hold still held when its Renewal is due is renewed.
	kc, c := Key{"lock:c", "o2"}, newTestHolder()
	if err := w.addYoung(kc, Renewal{Lease: 90 * time.Millisecond}, c, time.Now()); err != nil {
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
	w.Remove(kc, c)
}

// TestWatchdogPromoteChunks: young holds move into the watchdog's index at
// most promoteChunk under one hold of its mutex, so that a client that
// took many locks since the watchdog last looked does not stall its own
// calls while they move; promote moves them all, a chunk at a time.
func TestWatchdogPromoteChunks(t *testing.T) {
	w := New(func(context.Context, []*Held, time.Time) {})
	defer w.Close()
	const n = 2*promoteChunk + 100
	start := time.Now()
	for i := range n {
		k := Key{fmt.Sprintf("lock:%d", i), "o"}
		if err := w.addYoung(k, Renewal{Lease: time.Minute}, newTestHolder(), start); err != nil {
			t.Fatal(err)
		}
	}
	w.mu.Lock()
	done := w.promoteSome(promoteChunk)
	w.mu.Unlock()
	if y, e, q, x := w.Counts(); done || y != n-promoteChunk || e != promoteChunk || q != promoteChunk || x != promoteChunk {
		t.Fatalf("after one chunk: done %v, %d young, %d entries, %d queued, %d expiries; want false, %d young and %d in each index", done, y, e, q, x, n-promoteChunk, promoteChunk)
	}
	w.mu.Lock()
	w.promote()
	w.mu.Unlock()
	if y, e, q, x := w.Counts(); y != 0 || e != n || q != n || x != n {
		t.Fatalf("after promote: %d young, %d entries, %d queued, %d expiries; want 0 and %d in each index", y, e, q, x, n)
	}
}

// TestWatchdogYoungExpires: a young hold's local expiry ends its holder
// with impl.ErrLockLost although the watchdog's goroutine, stuck in another
// hold's Renewal, never looked at it: the expiry timer promotes the young
// holds before it looks.
func TestWatchdogYoungExpires(t *testing.T) {
	stuck, unstick := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w := New(func(_ context.Context, batch []*Held, _ time.Time) {
		once.Do(func() { close(stuck) })
		<-unstick // Redis does not answer
		for _, h := range batch {
			h.Outcome = Again
		}
	})
	defer w.Close()
	defer close(unstick)
	long := newTestHolder()
	if err := w.addYoung(Key{"lock:long", "o1"}, Renewal{Lease: 30 * time.Millisecond}, long, time.Now()); err != nil {
		t.Fatal(err)
	}
	<-stuck // the goroutine is in long's Renewal
	young := newTestHolder()
	start, lease := time.Now(), 200*time.Millisecond
	if err := w.addYoung(Key{"lock:young", "o2"}, Renewal{Lease: lease}, young, start); err != nil {
		t.Fatal(err)
	}
	select {
	case <-young.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a young hold outlived its local expiry while the watchdog's goroutine was stuck")
	}
	if !errors.Is(young.cause, impl.ErrLockLost) {
		t.Fatalf("the young hold ended with %v, want impl.ErrLockLost", young.cause)
	}
	if at := time.Since(start); at < lease {
		t.Fatalf("the young hold ended %v after it was taken, before its lease of %v", at, lease)
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
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{fmt.Sprintf("lock:%d", i), "o"}
	}
	fill := func(w *Watchdog) {
		start := time.Now()
		for _, k := range keys {
			if err := w.addYoung(k, Renewal{Lease: time.Minute}, newTestHolder(), start); err != nil {
				b.Fatal(err)
			}
		}
	}
	var all, chunk time.Duration
	for b.Loop() {
		b.StopTimer()
		w := New(func(context.Context, []*Held, time.Time) {})
		fill(w)
		b.StartTimer()
		w.mu.Lock()
		t := time.Now()
		w.promoteSome(math.MaxInt)
		all += time.Since(t)
		w.mu.Unlock()
		b.StopTimer()
		w.Close()
		w = New(func(context.Context, []*Held, time.Time) {})
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
		w.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(all)/float64(b.N)/float64(time.Millisecond), "ms-all-at-once")
	b.ReportMetric(float64(chunk)/float64(b.N)/float64(time.Microsecond), "µs-longest-chunk")
}

// TestWatchdogFirstRenewalOnTime: a hand-off's hold (Renewal.First, a
// short lease until its first Renewal) is renewed a little before a third
// of First, not whenever the watchdog wakes for another hold: its early
// window is a quarter of its own interval, not of its spec lease's (a 30 s
// lease's quarter is 2.5 s, which renewed every young hand-off at once).
// Its next Renewal then follows its spec lease.
func TestWatchdogFirstRenewalOnTime(t *testing.T) {
	type renewal struct {
		k  Key
		at time.Time
	}
	renewals := make(chan renewal, 1024)
	w := New(func(_ context.Context, batch []*Held, _ time.Time) {
		for _, h := range batch {
			h.Outcome = Renewed
			select {
			case renewals <- renewal{h.k, time.Now()}:
			default:
			}
		}
	})
	defer w.Close()
	// A hold renewed every 10 ms keeps the watchdog waking.
	busy, kb := newTestHolder(), Key{"lock:busy", "o1"}
	if err := w.addYoung(kb, Renewal{Lease: 30 * time.Millisecond}, busy, time.Now()); err != nil {
		t.Fatal(err)
	}
	defer w.Remove(kb, busy)
	first := 600 * time.Millisecond
	handed, kh := newTestHolder(), Key{"lock:handed", "o2"}
	start := time.Now()
	if err := w.addYoung(kh, Renewal{Lease: 30 * time.Second, First: first}, handed, start); err != nil {
		t.Fatal(err)
	}
	defer w.Remove(kh, handed)
	earliest := start.Add(RenewEvery(first) - RenewEvery(first)/4)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case r := <-renewals:
			if r.k != kh {
				continue
			}
			if r.at.Before(earliest) {
				t.Fatalf("the hand-off's hold was renewed %v after it was taken, want no sooner than %v", r.at.Sub(start), earliest.Sub(start))
			}
			// The watchdog applies the outcome after the renew function
			// returns: wait for it (First gone) before reading when the
			// hold is due again.
			var next time.Time
			var firstLeft time.Duration
			redistest.Within(5*time.Second, func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				h := w.entries[kh]
				next, firstLeft = h.next, h.first
				return firstLeft == 0
			})
			if firstLeft != 0 || next.Sub(r.at) < RenewEvery(30*time.Second)/2 {
				t.Fatalf("after its first renewal the hold keeps First %v and is due again in %v; want 0 and its lease's interval", firstLeft, next.Sub(r.at))
			}
			return
		case <-timeout:
			t.Fatal("the hand-off's hold was not renewed")
		}
	}
}
