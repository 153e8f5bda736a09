package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// serve runs q.Serve in the background and returns a function that stops
// it and returns Serve's error.
func serve[T any](t *testing.T, q *lockrt.ReliableQueue[T], h func(context.Context, T) error, opts ...lockrt.WorkerOption) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- q.Serve(ctx, h, opts...) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-res:
			case <-time.After(30 * time.Second):
				err = errors.New("Serve did not return within 30s of its context's end")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestWorkerRetriesThenDeadLetters: a handler that always fails gets the
// item maxDeliveries times, each retry waiting in the delayed set for
// its backoff, and then the item is a dead letter with the last error.
func TestWorkerRetriesThenDeadLetters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, time.Minute)
		q := lockrt.NewReliableQueue(newClient(t, b), queueDef(t, false, time.Minute, 3), lockrt.JSON[string]{}, key(t))
		if _, err := q.Offer(ctx, "job"); err != nil {
			t.Fatal(err)
		}
		attempts := make(chan lockrt.Job, 10)
		var reported atomic.Int32
		stop := serve(t, q, func(ctx context.Context, v string) error {
			j, _ := lockrt.JobFrom(ctx)
			attempts <- j
			return fmt.Errorf("attempt %d failed", j.Attempt)
		}, lockrt.WithBackoff(func(int, error) time.Duration { return 300 * time.Millisecond }),
			lockrt.WithErrorHandler(func(lockrt.Job, error) { reported.Add(1) }))
		for want := 1; want <= 3; want++ {
			j := <-attempts
			if j.Attempt != want {
				t.Fatalf("delivery %d has attempt %d", want, j.Attempt)
			}
			if want < 3 {
				// The retry waits in the delayed set for its backoff.
				until(t, func() bool {
					st, err := q.Stats(ctx)
					return err == nil && st.Delayed == 1 && st.InFlight == 0
				})
			}
		}
		until(t, func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Dead == 1
		})
		dl, err := q.DeadLetters(ctx, 10)
		if err != nil || len(dl) != 1 || dl[0].Value != "job" || dl[0].Deliveries != 3 || dl[0].Reason != "attempt 3 failed" {
			t.Fatalf("dead letters %+v, %v; want job after 3 deliveries, reason attempt 3 failed", dl, err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if len(attempts) != 0 || reported.Load() != 3 {
			t.Errorf("%d more attempts, %d errors reported; want 0, 3", len(attempts), reported.Load())
		}
	})
}

// TestWorkerSkipRetry: an error wrapping ErrSkipRetry dead-letters the
// item after one delivery.
func TestWorkerSkipRetry(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, time.Minute)
	q := lockrt.NewReliableQueue(newClient(t, backends()[0]), queueDef(t, false, time.Minute, 5), lockrt.JSON[int]{}, key(t))
	if _, err := q.Offer(ctx, 1); err != nil {
		t.Fatal(err)
	}
	serve(t, q, func(context.Context, int) error { return fmt.Errorf("bad input: %w", lockrt.ErrSkipRetry) })
	until(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Dead == 1
	})
	if dl, err := q.DeadLetters(ctx, 1); err != nil || dl[0].Deliveries != 1 {
		t.Fatalf("dead letters %+v, %v; want one after 1 delivery", dl, err)
	}
}

// TestWorkerPanic: a handler's panic is a failed attempt with the panic
// recorded; the worker survives it, and the retry succeeds.
func TestWorkerPanic(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, time.Minute)
	b := backends()[0]
	q := lockrt.NewReliableQueue(newClient(t, b), queueDef(t, false, time.Minute, 1), lockrt.JSON[int]{}, key(t, "dead"))
	if _, err := q.OfferMany(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var panics []*lockrt.PanicError
	serve(t, q, func(_ context.Context, v int) error {
		if v == 1 {
			panic("boom")
		}
		return nil
	}, lockrt.WithErrorHandler(func(_ lockrt.Job, err error) {
		var p *lockrt.PanicError
		if errors.As(err, &p) {
			mu.Lock()
			panics = append(panics, p)
			mu.Unlock()
		}
	}))
	until(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Dead == 1 && st.Ready == 0 && st.InFlight == 0
	})
	dl, err := q.DeadLetters(ctx, 1)
	if err != nil || dl[0].Value != 1 || !strings.HasPrefix(dl[0].Reason, "panic: boom\n") || !strings.Contains(dl[0].Reason, "worker_test.go") {
		t.Fatalf("dead letters %+v, %v; want item 1 with the panic and its stack", dl, err)
	}
	mu.Lock()
	if len(panics) != 1 || panics[0].Value != "boom" {
		t.Errorf("reported panics %v, want boom", panics)
	}
	mu.Unlock()

	// With deliveries left, the panicking attempt is retried.
	q2 := lockrt.NewReliableQueue(newClient(t, b), queueDef(t, false, time.Minute, 3), lockrt.JSON[int]{}, key(t, "retried"))
	if _, err := q2.Offer(ctx, 7); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	serve(t, q2, func(context.Context, int) error {
		if calls.Add(1) == 1 {
			panic("once")
		}
		return nil
	}, lockrt.WithBackoff(lockrt.ExponentialBackoff(10*time.Millisecond, 20*time.Millisecond)))
	until(t, func() bool {
		st, err := q2.Stats(ctx)
		return err == nil && calls.Load() == 2 && st == lockrt.QueueStats{}
	})
}

// TestWorkerTimeout: a handler that runs past its visibility timeout is
// not redelivered meanwhile (the worker extends the delivery); one that
// runs past WithTimeout has its context cancelled with ErrHandlerTimeout
// and the attempt counts as failed.
func TestWorkerTimeout(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, time.Minute)
	b := backends()[0]
	// A visibility of 3 s: the worker extends every vis/3, so a loaded
	// machine must starve it for 2 s before a delivery runs out (at 900 ms
	// CI's race run once let both items' run out; at 1.5 s a run beside
	// two busy loops let item 2's second delivery run out before its
	// timeout).
	vis := 3 * time.Second
	q := lockrt.NewReliableQueue(newClient(t, b), queueDef(t, false, vis, 2), lockrt.JSON[int]{}, key(t))
	// Another client consumes too: a delivery whose visibility ran out
	// would reach it.
	other := lockrt.NewReliableQueue(newClient(t, b), queueDef(t, false, vis, 2), lockrt.JSON[int]{}, key(t))
	if _, err := q.OfferMany(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int][]int{} // item -> attempts
	causes := map[int]error{}
	h := func(ctx context.Context, v int) error {
		j, _ := lockrt.JobFrom(ctx)
		mu.Lock()
		seen[v] = append(seen[v], j.Attempt)
		mu.Unlock()
		if v == 1 { // slow: 3 visibility timeouts, within WithTimeout
			select {
			case <-time.After(3 * vis):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		<-ctx.Done() // item 2 never finishes in time
		mu.Lock()
		causes[j.Attempt] = context.Cause(ctx)
		mu.Unlock()
		return ctx.Err()
	}
	opts := []lockrt.WorkerOption{lockrt.WithConcurrency(2), lockrt.WithTimeout(3*vis + time.Second),
		lockrt.WithBackoff(func(int, error) time.Duration { return 0 })}
	serve(t, q, h, opts...)
	serve(t, other, h, opts...)
	eventually(t, time.Minute, func() bool { // two timeouts, then the dead letter
		mu.Lock()
		ended := len(causes)
		mu.Unlock()
		st, err := q.Stats(ctx)
		return err == nil && ended == 2 && st.Dead == 1 && st.Ready == 0 && st.InFlight == 0 && st.Delayed == 0
	}, "item 2 was not dead-lettered after two timeouts")
	mu.Lock()
	defer mu.Unlock()
	if len(seen[1]) != 1 {
		t.Errorf("the slow item was delivered %v times, want once", seen[1])
	}
	if len(seen[2]) != 2 || !errors.Is(causes[1], lockrt.ErrHandlerTimeout) || !errors.Is(causes[2], lockrt.ErrHandlerTimeout) {
		t.Errorf("the stuck item: attempts %v, causes %v; want 2 attempts ended by ErrHandlerTimeout", seen[2], causes)
	}
	dl, err := q.DeadLetters(ctx, 1)
	if err != nil || dl[0].Value != 2 || !strings.Contains(dl[0].Reason, "timed out") {
		t.Errorf("dead letters %+v, %v; want item 2, timed out", dl, err)
	}
}

// TestWorkerGracefulShutdown: stopping a worker with items in flight lets
// them finish and acknowledges them; nothing is lost and nothing runs
// twice across the stop and a second worker that drains the rest.
func TestWorkerGracefulShutdown(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const n = 200
		ctx := withTimeout(t, time.Minute)
		d, k := queueDef(t, false, 10*time.Second, 3), key(t)
		q := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[int]{}, k)
		items := make([]int, n)
		for i := range items {
			items[i] = i
		}
		if _, err := q.OfferMany(ctx, items...); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		runs := map[int]int{}
		var running, handled atomic.Int32
		h := func(ctx context.Context, v int) error {
			running.Add(1)
			defer running.Add(-1)
			time.Sleep(50 * time.Millisecond) // ignores ctx: finishes within the shutdown timeout
			mu.Lock()
			runs[v]++
			mu.Unlock()
			handled.Add(1)
			return nil
		}
		stop := serve(t, q, h, lockrt.WithConcurrency(8))
		until(t, func() bool { return handled.Load() >= 20 && running.Load() > 0 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		first := len(runs)
		mu.Unlock()
		st, err := q.Stats(ctx)
		if err != nil || st.InFlight != 0 || int(st.Ready)+first != n {
			t.Fatalf("after the stop: %d handled, stats %+v, %v; want none in flight and the rest ready", first, st, err)
		}
		stop = serve(t, lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[int]{}, k), h, lockrt.WithConcurrency(8))
		until(t, func() bool { return handled.Load() >= n })
		// Stopped, the worker runs no handler any more: a second run of
		// an item would have shown by now.
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if runs[i] != 1 {
				t.Errorf("item %d ran %d times", i, runs[i])
			}
		}
		t.Logf("%d items handled before the stop, %d after", first, n-first)
	})
}

// TestWorkerShutdownTimeout: a handler still running when the shutdown
// timeout passes has its context cancelled with ErrShutdown, and its
// item goes back unharmed: first in line, its delivery not counted.
func TestWorkerShutdownTimeout(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, time.Minute)
	b := backends()[0]
	d, k := queueDef(t, false, 10*time.Second, 1), key(t)
	q := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[int]{}, k)
	if _, err := q.OfferMany(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	cause := make(chan error, 1)
	stop := serve(t, q, func(ctx context.Context, v int) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, lockrt.WithShutdownTimeout(200*time.Millisecond))
	<-started
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := <-cause; !errors.Is(c, lockrt.ErrShutdown) {
		t.Errorf("handler context ended by %v, want ErrShutdown", c)
	}
	// maxDeliveries is 1: had the delivery counted, the item would be
	// dead-lettered at its next failure; it is first again, attempt 1.
	dl, err := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[int]{}, k).TryTake(ctx, 0)
	if err != nil || dl.Value != 1 || dl.Attempt() != 1 {
		t.Fatalf("took %+v, %v; want item 1, attempt 1", dl, err)
	}
	if st, err := q.Stats(ctx); err != nil || st.Dead != 0 || st.Ready != 1 {
		t.Errorf("stats %+v, %v; want 1 ready, no dead letters", st, err)
	}
}

// TestWorkerMiddleware: middleware runs outermost first, sees the job,
// and can fail an attempt without calling the handler.
func TestWorkerMiddleware(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, time.Minute)
	q := lockrt.NewReliableQueue(newClient(t, backends()[0]), queueDef(t, false, time.Minute, 1), lockrt.JSON[int]{}, key(t))
	if _, err := q.OfferMany(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var trace []string
	log := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
	mw := func(name string) lockrt.Middleware {
		return func(ctx context.Context, next func(context.Context) error) error {
			j, ok := lockrt.JobFrom(ctx)
			log(fmt.Sprintf("%s %v %d", name, ok, j.Attempt))
			if name == "outer" && j.ID != "" {
				if v := ctx.Value(struct{}{}); v != nil {
					t.Error("unexpected value")
				}
			}
			return next(ctx)
		}
	}
	deny := func(ctx context.Context, next func(context.Context) error) error {
		if len(trace) > 3 {
			return errors.New("denied")
		}
		return next(ctx)
	}
	serve(t, q, func(_ context.Context, v int) error { log(fmt.Sprint("handler ", v)); return nil },
		lockrt.WithMiddleware(mw("outer"), mw("inner")), lockrt.WithMiddleware(deny))
	until(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Ready == 0 && st.InFlight == 0 && st.Dead == 1
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"outer true 1", "inner true 1", "handler 1", "outer true 1", "inner true 1"}
	if fmt.Sprint(trace) != fmt.Sprint(want) {
		t.Errorf("trace %q, want %q", trace, want)
	}
}

// until polls cond (counts, not times) until it holds, for 20s at most.
func until(t *testing.T, cond func() bool) {
	t.Helper()
	eventually(t, 20*time.Second, cond, "the worker did not get there")
}

// ackTrips records the round trips that carry acknowledgements (EVALSHAs
// of queue_ack): how many each carried, in order.
type ackTrips struct {
	sha, claim string // queue_ack's and queue_take's
	claims     atomic.Int32
	mu         sync.Mutex
	sent       []int
}

// acks returns how many acknowledgements were sent.
func (h *ackTrips) acks() int {
	_, n := h.trips(0)
	return n
}

// trips returns how many round trips carried the first n
// acknowledgements (0 when fewer were sent), and how many were sent.
func (h *ackTrips) trips(n int) (trips, acks int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, k := range h.sent {
		acks += k
		if trips == 0 && acks >= n {
			trips = i + 1
		}
	}
	return trips, acks
}

func (h *ackTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *ackTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.ProcessPipelineHook(func(ctx context.Context, cmds []redis.Cmder) error {
			return next(ctx, cmds[0])
		})(ctx, []redis.Cmder{cmd})
	}
}

func (h *ackTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 && c.Name() == "evalsha" {
				switch a[1] {
				case h.sha:
					n++
				case h.claim:
					h.claims.Add(1)
				}
			}
		}
		if n > 0 {
			h.mu.Lock()
			h.sent = append(h.sent, n)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// TestWorkerAcksShareRoundTrips: a worker's handlers that return together
// acknowledge their deliveries in shared round trips (the
// acknowledgements' lane), and a worker is idle again once its handler
// returned, not once its acknowledgement came. Redis is paused for writes
// (CLIENT PAUSE WRITE, until CLIENT UNPAUSE) when 8 handlers return, so
// that the lane's flights (two at most) stay in the air: the
// acknowledgements that find no room wait behind them and go in one
// pipeline, 8 in at most 3 round trips however slow the machine (8 when
// each is sent alone).
func TestWorkerAcksShareRoundTrips(t *testing.T) {
	t.Parallel()
	const workers = 8
	node := redistest.Single(t)
	ctx := withTimeout(t, time.Minute)
	d, k := queueDef(t, false, 30*time.Second, 3), key(t)
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	h := &ackTrips{sha: d.Scripts.Ack.SHA1, claim: d.Scripts.Take.SHA1}
	rdb.AddHook(h)
	c := lockrt.New(rdb)
	defer func() { c.Close(); rdb.Close() }()
	if err := c.Preload(ctx, d.Scripts.Ack); err != nil {
		t.Fatal(err)
	}
	q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, k)
	items := make([]int, 2*workers)
	for i := range items {
		items[i] = i
	}
	if _, err := q.OfferMany(ctx, items...); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var first, later atomic.Int32 // handlers of the first items started, of the others
	stop := serve(t, q, func(_ context.Context, v int) error {
		if v < workers {
			first.Add(1)
			<-gate
			return nil
		}
		later.Add(1)
		return nil
	}, lockrt.WithConcurrency(workers))
	until(t, func() bool { return first.Load() == workers })
	admin := node.Client()
	defer admin.Close()
	if err := admin.Do(ctx, "client", "pause", 60000, "write").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(context.Background(), "client", "unpause")
	claims := h.claims.Load()
	close(gate)
	// Every acknowledgement in a paused flight or waiting for one; the
	// workers are idle meanwhile: they claim more items (claims that wait
	// for Redis too, in the takes' lane).
	until(t, func() bool { return h.acks()+lockrt.AcksQueued(c) == workers && h.claims.Load() > claims })
	if err := admin.Do(ctx, "client", "unpause").Err(); err != nil {
		t.Fatal(err)
	}
	until(t, func() bool { return later.Load() == workers })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.InFlight != 0 || st.Ready != 0 {
		t.Fatalf("after the worker stopped: stats %+v, %v; want every item acknowledged", st, err)
	}
	// The first 8 in at most 3 round trips: the two paused flights, then
	// the rest together (which a later acknowledgement may have joined).
	if trips, acks := h.trips(workers); acks != 2*workers || trips > 3 {
		t.Errorf("the first %d acknowledgements took %d round trips (%d sent in all, in %v), want at most 3 and %d", workers, trips, acks, h.sent, 2*workers)
	}
}
