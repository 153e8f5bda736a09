package bench

// BenchmarkWorker: lockgen's typed worker (ReliableQueue.Serve) against
// asynq's server, both with 8 workers, in the same run: 4 producer
// clients enqueue workerItems jobs while the workers handle them (a
// handler that does nothing). Each b.N iteration is one round of both,
// lockgen first, then asynq; the metrics are the medians over the rounds
// of items/s and of the p99 enqueue-to-handled latency, and their
// ratios. Run it with -benchtime=5x.
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
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchqueues"
	"github.com/lockgen/lockgen/scripts/redistest"
)

const (
	workerItems       = 5000
	workerConcurrency = 8
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

func lockgenWorkerRound(b *testing.B) workerRound {
	flush(b)
	run := fmt.Sprint(time.Now().UnixNano())
	pc, wc := queueClients(b, producers), queueClients(b, 1)
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
		rdb := newRedis(b)
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

func asynqWorkerRound(b *testing.B) workerRound {
	flush(b)
	opt := asynq.RedisClientOpt{Addr: node.Addr}
	lat := newLatencies(workerItems)
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: workerConcurrency, LogLevel: asynq.FatalLevel})
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

func BenchmarkWorker(b *testing.B) {
	var lockgen, peer []workerRound
	for range b.N {
		lockgen = append(lockgen, lockgenWorkerRound(b))
		peer = append(peer, asynqWorkerRound(b))
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
	lps, aps := median(lockgen, perSec), median(peer, perSec)
	lp, ap := median(lockgen, p99), median(peer, p99)
	b.ReportMetric(lps, "lockgen-items/s")
	b.ReportMetric(aps, "asynq-items/s")
	b.ReportMetric(lp, "lockgen-p99-ms")
	b.ReportMetric(ap, "asynq-p99-ms")
	b.ReportMetric(lps/aps, "items/s-ratio")
	b.ReportMetric(lp/ap, "p99-ratio")
}
