package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// muxLog records which queue each handled item came from, and cancels
// the Mux's context after stopAt items.
type muxLog struct {
	mu     sync.Mutex
	seq    []string
	stopAt int
	cancel context.CancelFunc
}

func (l *muxLog) handler(name string) func(context.Context, int) error {
	return func(context.Context, int) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seq = append(l.seq, name)
		if len(l.seq) == l.stopAt {
			l.cancel()
		}
		return nil
	}
}

func (l *muxLog) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[string]int{}
	for _, s := range l.seq {
		n[s]++
	}
	return n
}

// TestMuxWeighted: one worker over three full queues of weights 3, 2 and
// 1 handles them in the ratio 3:2:1 exactly over every 6 items (smooth
// weighted round robin), counted over the first 60; a plain queue and a
// reliable one share a Mux.
func TestMuxWeighted(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 60*time.Second)
		c := newClient(t, b)
		high := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 3), lockrt.JSON[int]{}, key(t, "high"))
		mid := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 3), lockrt.JSON[int]{}, key(t, "mid"))
		low := lockrt.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, key(t, "low"))
		items := make([]int, 40)
		for _, q := range []interface {
			OfferMany(context.Context, ...int) error
		}{relOffer{high}, relOffer{mid}, low} {
			if err := q.OfferMany(ctx, items...); err != nil {
				t.Fatal(err)
			}
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		log := &muxLog{stopAt: 60, cancel: cancel}
		m := lockrt.NewMux()
		lockrt.Handle(m, high, 3, log.handler("high"))
		lockrt.Handle(m, mid, 2, log.handler("mid"))
		lockrt.Handle(m, low, 1, log.handler("low"))
		if err := m.Serve(sctx); err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		seq := log.seq[:60]
		log.mu.Unlock()
		for i := 0; i+6 <= len(seq); i += 6 {
			n := map[string]int{}
			for _, s := range seq[i : i+6] {
				n[s]++
			}
			if n["high"] != 3 || n["mid"] != 2 || n["low"] != 1 {
				t.Fatalf("items %d-%d: %v, want high 3, mid 2, low 1 (sequence %v)", i, i+5, n, seq)
			}
		}
		t.Logf("first 12: %v", seq[:12])
	})
}

// relOffer is a reliable queue's OfferMany without its ids.
type relOffer struct{ *lockrt.ReliableQueue[int] }

func (q relOffer) OfferMany(ctx context.Context, vs ...int) error {
	return errOnly(q.ReliableQueue.OfferMany(ctx, vs...))
}

// TestMuxStrictPriority: under StrictPriority one worker handles every
// item of the highest queue before any of the next, and an empty queue's
// turn goes to the next; a paused queue is passed over until resumed.
func TestMuxStrictPriority(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 60*time.Second)
		c := newClient(t, b)
		var qs []*lockrt.ReliableQueue[int]
		for _, name := range []string{"a", "b", "c"} {
			q := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 3), lockrt.JSON[int]{}, key(t, name))
			if _, err := q.OfferMany(ctx, 1, 2, 3, 4, 5); err != nil {
				t.Fatal(err)
			}
			qs = append(qs, q)
		}
		if err := qs[0].Pause(ctx); err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		log := &muxLog{stopAt: 15, cancel: cancel}
		m := lockrt.NewMux(lockrt.StrictPriority())
		lockrt.Handle(m, qs[2], 1, log.handler("c"))
		lockrt.Handle(m, qs[0], 3, log.handler("a"))
		lockrt.Handle(m, qs[1], 2, func(ctx context.Context, v int) error {
			if v == 5 { // the last of b: a is resumed before c's turn
				if err := qs[0].Resume(ctx); err != nil {
					t.Error(err)
				}
			}
			return log.handler("b")(ctx, v)
		})
		if err := m.Serve(sctx); err != nil {
			t.Fatal(err)
		}
		want := slices.Concat(slices.Repeat([]string{"b"}, 5), slices.Repeat([]string{"a"}, 5), slices.Repeat([]string{"c"}, 5))
		if !slices.Equal(log.seq, want) {
			t.Fatalf("handled %v, want %v", log.seq, want)
		}
	})
}

// TestMuxWaitsOnAll: a Mux whose queues are all empty waits on every one
// of them (a waiting Take each, no polling) and handles an item offered
// to any, the lowest weight's included; at shutdown the items it took
// and did not handle go back.
func TestMuxWaitsOnAll(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 60*time.Second)
		c := newClient(t, b)
		rdb := b.new()
		t.Cleanup(func() { rdb.Close() })
		hk, lk := key(t, "high"), key(t, "low")
		high := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 3), lockrt.JSON[int]{}, hk)
		low := lockrt.NewDelayedQueue(c, queueDef(t, true, 0, 0), lockrt.JSON[int]{}, lk)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		got := make(chan string, 4)
		m := lockrt.NewMux()
		lockrt.Handle(m, high, 5, func(_ context.Context, v int) error { got <- fmt.Sprint("high ", v); return nil })
		lockrt.Handle(m, low, 1, func(_ context.Context, v int) error { got <- fmt.Sprint("low ", v); return nil })
		done := make(chan error, 1)
		go func() { done <- m.Serve(sctx, lockrt.WithConcurrency(2)) }()
		waitTakers(t, rdb, hk, 2)
		waitTakers(t, rdb, lk, 2)
		if err := low.OfferIn(ctx, 7, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if s := <-got; s != "low 7" {
			t.Fatalf("handled %q, want low 7", s)
		}
		if _, err := high.Offer(ctx, 8); err != nil {
			t.Fatal(err)
		}
		if s := <-got; s != "high 8" {
			t.Fatalf("handled %q, want high 8", s)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for _, q := range []interface {
			Stats(context.Context) (lockrt.QueueStats, error)
		}{high, low} {
			if st, err := q.Stats(ctx); err != nil || st != (lockrt.QueueStats{}) {
				t.Fatalf("stats after shutdown %+v (%v), want empty", st, err)
			}
		}
	})
}

// TestPlainServe: the worker of a plain queue handles every item once, in
// order with one worker; a failed item is reported and gone (at most
// once), not retried; a bad registration or option is ErrInvalidArgument.
func TestPlainServe(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 60*time.Second)
		c := newClient(t, b)
		q := lockrt.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, key(t))
		if err := q.OfferMany(ctx, 1, 2, 3, 4); err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var mu sync.Mutex
		var handled, failed []int
		err := q.Serve(sctx, func(ctx context.Context, v int) error {
			mu.Lock()
			defer mu.Unlock()
			if j, ok := lockrt.JobFrom(ctx); !ok || j.Queue != q.Name() {
				t.Errorf("job %+v, %v", j, ok)
			}
			handled = append(handled, v)
			if len(handled) == 4 {
				cancel()
			}
			if v == 2 {
				return errors.New("boom")
			}
			if v == 3 {
				panic("bang")
			}
			return nil
		}, lockrt.WithErrorHandler(func(j lockrt.Job, err error) {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, len(handled))
		}))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(handled, []int{1, 2, 3, 4}) || !slices.Equal(failed, []int{2, 3}) {
			t.Fatalf("handled %v, failed after %v; want 1-4, failures at 2 and 3", handled, failed)
		}
		if st, err := q.Stats(ctx); err != nil || st != (lockrt.QueueStats{}) {
			t.Fatalf("stats %+v (%v), want empty: failed items are not retried", st, err)
		}
		if err := q.Serve(ctx, nil); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("Serve with a nil handler: %v", err)
		}
		m := lockrt.NewMux()
		lockrt.Handle(m, q, 0, func(context.Context, int) error { return nil })
		if err := m.Serve(ctx); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("weight 0: %v", err)
		}
		m = lockrt.NewMux()
		lockrt.Handle(m, q, 1, func(context.Context, int) error { return nil })
		lockrt.Handle(m, q, 2, func(context.Context, int) error { return nil })
		if err := m.Serve(ctx); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("a queue twice: %v", err)
		}
		if err := lockrt.NewMux().Serve(ctx); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("no queues: %v", err)
		}
	})
}

// TestMuxWeightedConcurrent: four workers over three full queues of
// weights 3, 2 and 1 share the first 240 items close to 120, 80 and 40
// (workers pick concurrently, so the exact round robin of one worker
// bends by a few items).
func TestMuxWeightedConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 60*time.Second)
		c := newClient(t, b)
		items := make([]int, 200)
		m := lockrt.NewMux()
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		log := &muxLog{stopAt: 240, cancel: cancel}
		for i, name := range []string{"high", "mid", "low"} {
			q := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 3), lockrt.JSON[int]{}, key(t, name))
			if _, err := q.OfferMany(ctx, items...); err != nil {
				t.Fatal(err)
			}
			lockrt.Handle(m, q, 3-i, log.handler(name))
		}
		if err := m.Serve(sctx, lockrt.WithConcurrency(4)); err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		first := slices.Clone(log.seq[:240])
		log.mu.Unlock()
		n := map[string]int{}
		for _, s := range first {
			n[s]++
		}
		t.Logf("first 240: %v", n)
		for name, want := range map[string]int{"high": 120, "mid": 80, "low": 40} {
			if d := n[name] - want; d < -12 || d > 12 {
				t.Errorf("%s: %d of the first 240, want %d±12 (%v)", name, n[name], want, n)
			}
		}
	})
}

// TestMuxNilQueues: Handle with a nil queue, a typed nil one, or a
// delayed queue holding none records ErrInvalidArgument, which Serve
// returns, instead of a panic.
func TestMuxNilQueues(t *testing.T) {
	t.Parallel()
	h := func(context.Context, int) error { return nil }
	for name, q := range map[string]lockrt.Servable[int]{
		"typed nil":         (*lockrt.Queue[int])(nil),
		"nil delayed":       (*lockrt.DelayedQueue[int])(nil),
		"delayed with none": &lockrt.DelayedQueue[int]{},
		"nil reliable":      (*lockrt.ReliableQueue[int])(nil),
	} {
		m := lockrt.NewMux()
		lockrt.Handle(m, q, 1, h)
		if err := m.Serve(context.Background()); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("%s: Serve: %v, want ErrInvalidArgument", name, err)
		}
	}
}
