package bench

// Semaphores: lockgen's against asynq's x/rate semaphore, the closest Go
// peer found: a Redis sorted set of task ids scored by deadline, so that a
// crashed task's token comes back at its deadline, like lockgen's leased
// holds. It has no blocking acquire (Acquire reports false when no token
// is free; asynq's own pattern is to fail the task and retry it later), so
// here it is made to wait by polling every millisecond, as redislock is in
// the hand-off benchmark. Its Acquire and Release need a context carrying
// an asynq task id, which only asynq's server makes: asynqTasks runs real
// asynq tasks and lends their contexts to the benchmark.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynq/x/rate"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchsems"
)

// semClient is one client of one semaphore library, used by one
// goroutine: it holds at most one permit at a time.
type semClient interface {
	// acquire takes a permit, waiting as long as ctx allows.
	acquire(ctx context.Context) error
	// release gives back the permit of the last acquire.
	release(ctx context.Context) error
}

// semLib opens n clients of one library on the semaphore named id, of the
// given capacity (3 or 1, as in benchsems/lockgen.yaml).
type semLib struct {
	name string
	open func(tb testing.TB, n int, id string, capacity int) []semClient
}

var semLibs = []semLib{
	{"lockgen", openLockgenSems},
	{"asynq-rate-1ms", openAsynqSems},
}

// lockgenSem is lockgen's semaphore over a runtime client of its own.
type lockgenSem struct {
	s *lockrt.Semaphore
	p *lockrt.Permit
}

func openLockgenSems(tb testing.TB, n int, id string, capacity int) []semClient {
	var cs []semClient
	for range n {
		c := lockrt.New(newRedis(tb))
		tb.Cleanup(func() { c.Close() })
		if err := benchsems.Preload(context.Background(), c); err != nil {
			tb.Fatal(err)
		}
		sems := benchsems.NewSemaphores(c)
		s := sems.Slots(id)
		if capacity == 1 {
			s = sems.Single(id)
		}
		cs = append(cs, &lockgenSem{s: s})
	}
	return cs
}

func (l *lockgenSem) acquire(ctx context.Context) (err error) {
	l.p, err = l.s.Acquire(ctx, 1)
	return err
}

func (l *lockgenSem) release(ctx context.Context) error { return l.p.Release(ctx) }

// asynqSem is asynq's x/rate semaphore, with its own Redis connection,
// used under one asynq task's context, polling every millisecond.
type asynqSem struct {
	s    *rate.Semaphore
	task context.Context
}

func openAsynqSems(tb testing.TB, n int, id string, capacity int) []semClient {
	var cs []semClient
	for _, task := range asynqTasks(tb, n) {
		s := rate.NewSemaphore(asynq.RedisClientOpt{Addr: node.Addr}, id, capacity)
		tb.Cleanup(func() { s.Close() })
		cs = append(cs, &asynqSem{s: s, task: task})
	}
	return cs
}

func (a *asynqSem) acquire(ctx context.Context) error {
	for {
		ok, err := a.s.Acquire(a.task)
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (a *asynqSem) release(context.Context) error { return a.s.Release(a.task) }

// asynqTasks runs n tasks on an asynq server over node and returns their
// contexts, which carry what x/rate's semaphore needs: a task id and a
// deadline (an hour away). The tasks end when tb does.
func asynqTasks(tb testing.TB, n int) []context.Context {
	opt := asynq.RedisClientOpt{Addr: node.Addr}
	started := make(chan context.Context, n)
	done := make(chan struct{})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: n, LogLevel: asynq.FatalLevel})
	err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		started <- ctx
		<-done
		return nil
	}))
	if err != nil {
		tb.Fatal(err)
	}
	client := asynq.NewClient(opt)
	tb.Cleanup(func() {
		close(done)
		srv.Shutdown()
		client.Close()
	})
	for range n {
		if _, err := client.Enqueue(asynq.NewTask("bench", nil), asynq.Timeout(time.Hour), asynq.MaxRetry(0)); err != nil {
			tb.Fatal(err)
		}
	}
	ctxs := make([]context.Context, 0, n)
	for range n {
		select {
		case ctx := <-started:
			ctxs = append(ctxs, ctx)
		case <-time.After(30 * time.Second):
			tb.Fatalf("asynq started %d of %d tasks", len(ctxs), n)
		}
	}
	return ctxs
}

// BenchmarkSemaphoreUncontended: one client takes and releases one permit
// of a free 3-permit semaphore b.N times.
func BenchmarkSemaphoreUncontended(b *testing.B) {
	ctx := context.Background()
	for _, lib := range semLibs {
		b.Run(lib.name, func(b *testing.B) {
			flush(b)
			c := lib.open(b, 1, "uncontended", 3)[0]
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := c.acquire(ctx); err != nil {
					b.Fatal(err)
				}
				if err := c.release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// semContenders is how many clients share the 3 permits in
// BenchmarkSemaphoreContended.
const semContenders = 8

// contended has n clients loop acquire, a tiny critical section, release
// on one 3-permit semaphore until it was acquired total times; it fails
// when more than 3 hold it at once. It returns the time that took and how
// long each acquire waited, sorted.
func contended(cs []semClient, total int) (time.Duration, []time.Duration, error) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		start  = time.Now()
		taken  atomic.Int64
		inside atomic.Int64
		errs   = make([]error, len(cs))
		waits  = make([][]time.Duration, len(cs))
		wg     sync.WaitGroup
		end    atomic.Int64
	)
	for i, c := range cs {
		wg.Go(func() {
			for {
				asked := time.Now()
				if err := c.acquire(ctx); err != nil {
					if ctx.Err() == nil {
						errs[i] = fmt.Errorf("client %d: acquire: %w", i, err)
						stop()
					}
					return
				}
				waits[i] = append(waits[i], time.Since(asked))
				if inside.Add(1) > 3 {
					errs[i] = fmt.Errorf("client %d: more than 3 holders", i)
					stop()
				}
				if taken.Add(1) == int64(total) {
					end.Store(int64(time.Since(start)))
					stop()
				}
				inside.Add(-1)
				if err := c.release(context.Background()); err != nil {
					errs[i] = fmt.Errorf("client %d: release: %w", i, err)
					stop()
					return
				}
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	all := slices.Concat(waits...)
	slices.Sort(all)
	return time.Duration(end.Load()), all, errors.Join(errs...)
}

// BenchmarkSemaphoreContended: 8 clients, one goroutine each, share 3
// permits until they were taken b.N times in all. wait-*-µs: how long an
// acquire waited (the share of the permits a client gets shows there: a
// client that releases and asks again at once competes with waiters).
func BenchmarkSemaphoreContended(b *testing.B) {
	for _, lib := range semLibs {
		b.Run(lib.name, func(b *testing.B) {
			flush(b)
			cs := lib.open(b, semContenders, "contended", 3)
			b.ReportAllocs()
			b.ResetTimer()
			elapsed, waits, err := contended(cs, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
			b.ReportMetric(float64(percentile(waits, 50).Microseconds()), "wait-p50-µs")
			b.ReportMetric(float64(percentile(waits, 99).Microseconds()), "wait-p99-µs")
			b.ReportMetric(float64(waits[len(waits)-1].Microseconds()), "wait-max-µs")
		})
	}
}

// wakeups measures n times how long a client blocked in acquire on a
// 1-permit semaphore takes to get the permit after another client, which
// held it, starts releasing it.
func wakeups(cs []semClient, n int) ([]time.Duration, error) {
	ctx := context.Background()
	holder, waiter := cs[0], cs[1]
	samples := make([]time.Duration, 0, n)
	for range n {
		if err := holder.acquire(ctx); err != nil {
			return nil, err
		}
		got := make(chan error, 1)
		var at time.Time
		go func() {
			err := waiter.acquire(ctx)
			at = time.Now()
			got <- err
		}()
		time.Sleep(2 * time.Millisecond) // the waiter is blocked by now
		released := time.Now()
		if err := holder.release(ctx); err != nil {
			return nil, err
		}
		if err := <-got; err != nil {
			return nil, err
		}
		samples = append(samples, at.Sub(released))
		if err := waiter.release(ctx); err != nil {
			return nil, err
		}
	}
	slices.Sort(samples)
	return samples, nil
}

// BenchmarkSemaphoreWakeup: the latency from a release to the return of a
// blocked acquire on another client (p50-µs, p99-µs). ns/op includes the
// 2ms each round waits so that the waiter is surely blocked.
func BenchmarkSemaphoreWakeup(b *testing.B) {
	for _, lib := range semLibs {
		b.Run(lib.name, func(b *testing.B) {
			flush(b)
			cs := lib.open(b, 2, "wakeup", 1)
			b.ResetTimer()
			samples, err := wakeups(cs, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(percentile(samples, 50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(percentile(samples, 99).Microseconds()), "p99-µs")
		})
	}
}

// TestSemaphorePeers runs each semaphore benchmark for a few rounds per
// library, and checks that lockgen's uncontended acquire and release take
// one round trip each.
func TestSemaphorePeers(t *testing.T) {
	for _, lib := range semLibs {
		t.Run(lib.name, func(t *testing.T) {
			flush(t)
			if _, _, err := contended(lib.open(t, semContenders, "contended", 3), 50); err != nil {
				t.Fatal(err)
			}
			samples, err := wakeups(lib.open(t, 2, "wakeup", 1), 5)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: wake-up p50 %v", lib.name, percentile(samples, 50))
		})
	}
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer rdb.Close()
	hook := &roundTrips{}
	rdb.AddHook(hook)
	c := lockrt.New(rdb)
	defer c.Close()
	ctx := context.Background()
	if err := benchsems.Preload(ctx, c); err != nil {
		t.Fatal(err)
	}
	s := benchsems.NewSemaphores(c).Slots("trips")
	hook.trips.Store(0)
	for range 10 {
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := hook.trips.Load(); got != 20 {
		t.Errorf("%d round trips for 10 Acquire+Release, want 20", got)
	}
}

// TestSemaphoreWakeupTrips counts what BenchmarkSemaphoreWakeup's waiter
// sends (a go-redis hook on its client): in each of 50 rounds, one
// EVALSHA before the release (the attempt that registers it) and nothing
// from the release until its Acquire returns: the release hands it the
// permit and its message is taken at its word, without a confirming
// attempt. So a wake-up costs the release's round trip and the message's
// delivery, no more.
func TestSemaphoreWakeupTrips(t *testing.T) {
	ctx := context.Background()
	var hooks []*roundTrips
	var sems []*lockrt.Semaphore
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
		defer rdb.Close()
		h := &roundTrips{}
		rdb.AddHook(h)
		hooks = append(hooks, h)
		c := lockrt.New(rdb)
		defer c.Close()
		if err := benchsems.Preload(ctx, c); err != nil {
			t.Fatal(err)
		}
		sems = append(sems, benchsems.NewSemaphores(c).Single("wakeup-trips"))
	}
	const rounds = 50
	var before, after int64
	for i := range rounds {
		held, err := sems[0].Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *lockrt.Permit, 1)
		go func() {
			p, err := sems[1].Acquire(ctx, 1)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		// Registered (and, after the first round, subscribed already).
		for deadline := time.Now().Add(5 * time.Second); hooks[1].trips.Load() == 0; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatal("the waiter sent nothing within 5s")
			}
		}
		time.Sleep(2 * time.Millisecond)
		b := hooks[1].trips.Swap(0)
		if i > 0 {
			before += b
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		p := <-got
		if i > 0 {
			after += hooks[1].trips.Swap(0)
		}
		if p == nil {
			t.FailNow()
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		hooks[1].trips.Store(0)
	}
	t.Logf("%d wake-ups: the waiter sent %.2f round trips per round before the release, %.2f after it", rounds-1, float64(before)/(rounds-1), float64(after)/(rounds-1))
	if before != rounds-1 || after != 0 {
		t.Errorf("the waiter sent %d round trips before %d releases and %d after them, want 1 per round before and 0 after", before, rounds-1, after)
	}
}
