package asynq26

// BenchmarkWorker: lockgen's typed worker (ReliableQueue.Serve) against
// the server of asynq v0.26 (the newest), all with 8 workers, in the same
// run: 4 producer clients enqueue workerItems jobs while the workers
// handle them (a handler that does nothing). Each b.N iteration is one
// round of each, in a random order: lockgen, asynq with its defaults
// (its processor sleeps 0.5-1.5 s whenever its queues are empty), and
// asynq with TaskCheckInterval 10 ms (asynq-poll10ms: sleeps of 5-15 ms,
// the most a user would tune it to, at the cost its docs warn of: more
// polling). The metrics are the medians over the rounds of items/s and of
// the p99 enqueue-to-handled latency, and lockgen's ratios to each.
// Run it with make bench-worker (-benchtime=8x).
//
// The producers offer as fast as they can, so the p99 is mostly the
// backlog of the round's last items when the workers are slower than the
// producers: a throughput figure. WORKER_RATE=<items/s> paces them
// instead (spread over the 4), below what the workers handle, and the
// p99 is then the latency of an item the workers have room for.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchqueues"
	"github.com/lockgen/lockgen/scripts/bench/internal/benchrun"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// workerItems is the items of a round: WORKER_ITEMS, 5000 unless set.
// asynq's processor sleeps 0.5-1.5 s when it first finds its queue empty,
// a large part of a 5000-item round; more items measure its steady state.
var workerItems = func() int {
	if n, err := strconv.Atoi(os.Getenv("WORKER_ITEMS")); err == nil && n > 0 {
		return n
	}
	return 5000
}()

const (
	workerConcurrency = 8
	producers         = 4
)

// workerRound is one round's result.
type workerRound struct {
	perSec float64
	p99    time.Duration
}

// latencies collects enqueue-to-handled latencies until n came.
type latencies struct {
	mu   sync.Mutex
	d    []time.Duration
	n    int
	done chan struct{}
}

func newLatencies(n int) *latencies {
	return &latencies{d: make([]time.Duration, 0, n), n: n, done: make(chan struct{})}
}

func (l *latencies) add(enqueued int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, time.Duration(time.Now().UnixNano()-enqueued))
	if len(l.d) == l.n {
		close(l.done)
	}
}

func (l *latencies) round(b *testing.B, start time.Time) workerRound {
	select {
	case <-l.done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("only %d of %d items handled", len(l.d), l.n)
	}
	elapsed := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.d)
	return workerRound{perSec: float64(l.n) / elapsed.Seconds(), p99: l.d[len(l.d)*99/100]}
}

// workerReady: when set (WORKER_READY=1), lockgen's round produces only
// once its worker waits for items (its claims registered in the queue's
// takers), so that the latencies leave out the worker's start (its
// scripts loaded, its wake-up channel subscribed); asynq's round starts
// producing when its server's Start returns.
var workerReady = os.Getenv("WORKER_READY") != ""

// workerRate is WORKER_RATE: the producers' items per second in all, 0
// for as fast as they can.
var workerRate, _ = strconv.Atoi(os.Getenv("WORKER_RATE"))

// paced returns offer paced to workerRate (unchanged without one): each
// of the producers offers its share of the items at its share of the
// rate, from when paced was called.
func paced(offer func(p int, j benchqueues.Job) error) func(p int, j benchqueues.Job) error {
	if workerRate <= 0 {
		return offer
	}
	start := time.Now()
	every := time.Second / time.Duration(workerRate) // between items of all producers
	return func(p int, j benchqueues.Job) error {
		time.Sleep(time.Until(start.Add(time.Duration(j.N) * every)))
		return offer(p, j)
	}
}

func flush(tb testing.TB) { benchrun.Flush(tb, node.Addr) }

func lockgenClients(tb testing.TB, n int) []*lockrt.Client { return benchrun.Clients(tb, node.Addr, n) }

func produceJobs(b *testing.B, n int, offer func(p int, j benchqueues.Job) error) {
	benchrun.Produce(b, producers, n, offer)
}

func BenchmarkWorker(b *testing.B) {
	rounds := map[string]func(*testing.B) workerRound{
		"lockgen":        lockgenWorkerRound,
		"asynq":          func(b *testing.B) workerRound { return asynqWorkerRound(b, 0) },
		"asynq-poll10ms": func(b *testing.B) workerRound { return asynqWorkerRound(b, 10*time.Millisecond) },
	}
	names := []string{"lockgen", "asynq", "asynq-poll10ms"}
	got := map[string][]workerRound{}
	for range b.N {
		rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for _, n := range names {
			got[n] = append(got[n], rounds[n](b))
		}
	}
	median := func(rs []workerRound, f func(workerRound) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	perSec := func(r workerRound) float64 { return r.perSec }
	p99 := func(r workerRound) float64 { return float64(r.p99) / 1e6 }
	lps, lp := median(got["lockgen"], perSec), median(got["lockgen"], p99)
	b.ReportMetric(lps, "lockgen-items/s")
	b.ReportMetric(lp, "lockgen-p99-ms")
	for _, peer := range []string{"asynq", "asynq-poll10ms"} {
		ps, pp := median(got[peer], perSec), median(got[peer], p99)
		b.ReportMetric(ps, peer+"-items/s")
		b.ReportMetric(pp, peer+"-p99-ms")
		b.ReportMetric(lps/ps, "items/s-ratio-"+peer)
		b.ReportMetric(lp/pp, "p99-ratio-"+peer)
	}
	// Each round's ratio, for the spread: lockgen's items/s over the
	// peer's of the same iteration.
	for _, peer := range []string{"asynq", "asynq-poll10ms"} {
		rs := make([]string, len(got[peer]))
		for i := range rs {
			rs[i] = fmt.Sprintf("%.2f", got["lockgen"][i].perSec/got[peer][i].perSec)
		}
		b.Logf("lockgen/%s per round: %v", peer, rs)
	}
}

func lockgenWorkerRound(b *testing.B) workerRound {
	flush(b)
	run := fmt.Sprint(time.Now().UnixNano())
	pc, wc := lockgenClients(b, producers), lockgenClients(b, 1)
	lat := newLatencies(workerItems)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	q := benchqueues.NewQueues(wc[0]).Acked(run)
	start := time.Now()
	go func() {
		served <- q.Serve(ctx, func(_ context.Context, j benchqueues.Job) error {
			lat.add(j.Due)
			return nil
		}, lockrt.WithConcurrency(workerConcurrency))
	}()
	if workerReady {
		rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
		defer rdb.Close()
		if !redistest.Within(10*time.Second, func() bool { return rdb.ZCard(context.Background(), q.Key()+":takers").Val() > 0 }) {
			b.Fatal("the worker did not register a claim within 10s")
		}
		start = time.Now()
	}
	produceJobs(b, workerItems, paced(func(p int, j benchqueues.Job) error {
		j.Due = time.Now().UnixNano()
		_, err := benchqueues.NewQueues(pc[p]).Acked(run).Offer(context.Background(), j)
		return err
	}))
	r := lat.round(b, start)
	stop()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	return r
}

// asynqWorkerRound is a round of asynq's server, with its
// TaskCheckInterval set to check when not 0.
func asynqWorkerRound(b *testing.B, check time.Duration) workerRound {
	flush(b)
	opt := asynq.RedisClientOpt{Addr: node.Addr}
	lat := newLatencies(workerItems)
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: workerConcurrency, LogLevel: asynq.FatalLevel, TaskCheckInterval: check})
	clients := make([]*asynq.Client, producers)
	for i := range clients {
		clients[i] = asynq.NewClient(opt)
		defer clients[i].Close()
	}
	start := time.Now()
	if err := srv.Start(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		var j benchqueues.Job
		if err := json.Unmarshal(t.Payload(), &j); err != nil {
			return err
		}
		lat.add(j.Due)
		return nil
	})); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	produceJobs(b, workerItems, paced(func(p int, j benchqueues.Job) error {
		j.Due = time.Now().UnixNano()
		payload, _ := json.Marshal(j)
		_, err := clients[p].Enqueue(asynq.NewTask("job", payload), asynq.MaxRetry(5))
		return err
	}))
	return lat.round(b, start)
}
