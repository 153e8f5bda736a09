package bench

// Queues: lockgen's generated queues against asynq, the closest Go peer
// on Redis with delayed (scheduled) tasks.
//
//   - BenchmarkQueueThroughput: enqueue -> deliver, 4 producer clients and
//     4 consumers; ns/op is per item, items/s is reported. The -batch
//     rows take up to 64 items per call (TakeN), the -ackall row also
//     acknowledges each batch in one call (AckAll); asynq has no batch
//     dequeue (its server takes one task per dequeue script). Each row
//     reports the commands and scripts Redis ran per item (INFO
//     commandstats, scripts' commands included: producers, consumers,
//     timers and background tasks) and the CPU time per item of Redis
//     and of the benchmark's process. QUEUE_CMDS=1 logs each command's
//     count per item as well.
//   - BenchmarkDelayLateness: 300 items with random delays of 0-2s; how
//     late after its due time each is delivered, p50 and p99. asynq moves
//     scheduled tasks with a forwarder that polls every 5s (hard-coded in
//     v0.19) and its processor sleeps 1s when it finds nothing; lockgen's
//     delay timer fires at the due time. Run it with -benchtime=1x.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchqueues"
	"github.com/lockgen/lockgen/scripts/bench/internal/benchrun"
)

const producers, consumers = 4, 4

// batch is how many items a batch consumer takes per call.
const batch = 64

// queueClients returns n runtime clients of node (benchrun.Clients).
func queueClients(tb testing.TB, n int) []*lockrt.Client { return benchrun.Clients(tb, node.Addr, n) }

// produceJobs offers n jobs from `producers` goroutines through offer.
func produceJobs(b *testing.B, n int, offer func(p int, j benchqueues.Job) error) {
	benchrun.Produce(b, producers, n, offer)
}

func BenchmarkQueueThroughput(b *testing.B) {
	b.Run("lockgen-plain", func(b *testing.B) {
		flush(b)
		cmds, cpu0, self0 := commandStats(b), redisCPU(b), selfCPU(b)
		run := fmt.Sprint(time.Now().UnixNano())
		pc, cc := queueClients(b, producers), queueClients(b, consumers)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var got atomic.Int64
		done := make(chan struct{})
		b.ResetTimer()
		for i := range consumers {
			q := benchqueues.NewQueues(cc[i]).Plain(run)
			go func() {
				for {
					if _, err := q.Take(ctx); err != nil {
						return
					}
					if got.Add(1) == int64(b.N) {
						close(done)
					}
				}
			}()
		}
		produceJobs(b, b.N, func(p int, j benchqueues.Job) error {
			return benchqueues.NewQueues(pc[p]).Plain(run).Offer(ctx, j)
		})
		<-done
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		reportPerItem(b, cmds, b.N)
		b.ReportMetric(float64((redisCPU(b)-cpu0).Microseconds())/float64(b.N), "redis-µs/item")
		b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/float64(b.N), "client-µs/item")
	})
	b.Run("lockgen-reliable", func(b *testing.B) {
		flush(b)
		cmds, cpu0, self0 := commandStats(b), redisCPU(b), selfCPU(b)
		run := fmt.Sprint(time.Now().UnixNano())
		pc, cc := queueClients(b, producers), queueClients(b, consumers)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var got atomic.Int64
		done := make(chan struct{})
		b.ResetTimer()
		for i := range consumers {
			q := benchqueues.NewQueues(cc[i]).Acked(run)
			go func() {
				for {
					d, err := q.Take(ctx)
					if err != nil {
						return
					}
					if err := d.Ack(ctx); err != nil {
						b.Error(err)
						return
					}
					if got.Add(1) == int64(b.N) {
						close(done)
					}
				}
			}()
		}
		produceJobs(b, b.N, func(p int, j benchqueues.Job) error {
			_, err := benchqueues.NewQueues(pc[p]).Acked(run).Offer(ctx, j)
			return err
		})
		<-done
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		reportPerItem(b, cmds, b.N)
		b.ReportMetric(float64((redisCPU(b)-cpu0).Microseconds())/float64(b.N), "redis-µs/item")
		b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/float64(b.N), "client-µs/item")
	})
	// The same with each consumer taking up to batch items per call
	// (TakeN: one BLMPOP, or one claim script for a reliable queue).
	b.Run("lockgen-plain-batch", func(b *testing.B) {
		flush(b)
		cmds, cpu0, self0 := commandStats(b), redisCPU(b), selfCPU(b)
		run := fmt.Sprint(time.Now().UnixNano())
		pc, cc := queueClients(b, producers), queueClients(b, consumers)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var got atomic.Int64
		done := make(chan struct{})
		b.ResetTimer()
		for i := range consumers {
			q := benchqueues.NewQueues(cc[i]).Plain(run)
			go func() {
				for {
					vs, err := q.TakeN(ctx, batch)
					if err != nil {
						return
					}
					if n := got.Add(int64(len(vs))); n >= int64(b.N) && n-int64(len(vs)) < int64(b.N) {
						close(done)
					}
				}
			}()
		}
		produceJobs(b, b.N, func(p int, j benchqueues.Job) error {
			return benchqueues.NewQueues(pc[p]).Plain(run).Offer(ctx, j)
		})
		<-done
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		reportPerItem(b, cmds, b.N)
		b.ReportMetric(float64((redisCPU(b)-cpu0).Microseconds())/float64(b.N), "redis-µs/item")
		b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/float64(b.N), "client-µs/item")
	})
	b.Run("lockgen-reliable-batch", func(b *testing.B) {
		flush(b)
		cmds, cpu0, self0 := commandStats(b), redisCPU(b), selfCPU(b)
		run := fmt.Sprint(time.Now().UnixNano())
		pc, cc := queueClients(b, producers), queueClients(b, consumers)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var got atomic.Int64
		done := make(chan struct{})
		b.ResetTimer()
		for i := range consumers {
			q := benchqueues.NewQueues(cc[i]).Acked(run)
			go func() {
				for {
					ds, err := q.TakeN(ctx, batch)
					if err != nil {
						return
					}
					for _, d := range ds {
						if err := d.Ack(ctx); err != nil {
							b.Error(err)
							return
						}
					}
					if n := got.Add(int64(len(ds))); n >= int64(b.N) && n-int64(len(ds)) < int64(b.N) {
						close(done)
					}
				}
			}()
		}
		produceJobs(b, b.N, func(p int, j benchqueues.Job) error {
			_, err := benchqueues.NewQueues(pc[p]).Acked(run).Offer(ctx, j)
			return err
		})
		<-done
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		reportPerItem(b, cmds, b.N)
		b.ReportMetric(float64((redisCPU(b)-cpu0).Microseconds())/float64(b.N), "redis-µs/item")
		b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/float64(b.N), "client-µs/item")
	})
	// The same, each batch acknowledged in one call (AckAll).
	b.Run("lockgen-reliable-batch-ackall", func(b *testing.B) {
		flush(b)
		cmds, cpu0, self0 := commandStats(b), redisCPU(b), selfCPU(b)
		run := fmt.Sprint(time.Now().UnixNano())
		pc, cc := queueClients(b, producers), queueClients(b, consumers)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var got atomic.Int64
		done := make(chan struct{})
		b.ResetTimer()
		for i := range consumers {
			q := benchqueues.NewQueues(cc[i]).Acked(run)
			go func() {
				for {
					ds, err := q.TakeN(ctx, batch)
					if err != nil {
						return
					}
					if err := q.AckAll(ctx, ds...); err != nil {
						b.Error(err)
						return
					}
					if n := got.Add(int64(len(ds))); n >= int64(b.N) && n-int64(len(ds)) < int64(b.N) {
						close(done)
					}
				}
			}()
		}
		produceJobs(b, b.N, func(p int, j benchqueues.Job) error {
			_, err := benchqueues.NewQueues(pc[p]).Acked(run).Offer(ctx, j)
			return err
		})
		<-done
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		reportPerItem(b, cmds, b.N)
		b.ReportMetric(float64((redisCPU(b)-cpu0).Microseconds())/float64(b.N), "redis-µs/item")
		b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/float64(b.N), "client-µs/item")
	})
	b.Run("asynq", func(b *testing.B) {
		flush(b)
		cmds, cpu0, self0 := commandStats(b), redisCPU(b), selfCPU(b)
		opt := asynq.RedisClientOpt{Addr: node.Addr}
		var got atomic.Int64
		done := make(chan struct{})
		srv := asynq.NewServer(opt, asynq.Config{Concurrency: consumers, LogLevel: asynq.FatalLevel})
		clients := make([]*asynq.Client, producers)
		for i := range clients {
			clients[i] = asynq.NewClient(opt)
			defer clients[i].Close()
		}
		b.ResetTimer()
		if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
			if got.Add(1) == int64(b.N) {
				close(done)
			}
			return nil
		})); err != nil {
			b.Fatal(err)
		}
		defer srv.Shutdown()
		produceJobs(b, b.N, func(p int, j benchqueues.Job) error {
			payload, _ := json.Marshal(j)
			_, err := clients[p].Enqueue(asynq.NewTask("job", payload), asynq.MaxRetry(0))
			return err
		})
		<-done
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		reportPerItem(b, cmds, b.N)
		b.ReportMetric(float64((redisCPU(b)-cpu0).Microseconds())/float64(b.N), "redis-µs/item")
		b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/float64(b.N), "client-µs/item")
	})
}

// reportPerItem reports the commands Redis ran per item since before (a
// commandStats), scripts' commands included and INFO not, and the
// scripts among them (EVALSHA and EVAL), as cmds/item and scripts/item:
// everything both libraries send while they work (producers, consumers,
// timers, asynq's background tasks).
func reportPerItem(b *testing.B, before map[string]int64, items int) {
	var cmds, scripts int64
	each := map[string]float64{}
	for name, n := range commandStats(b) {
		d := n - before[name]
		switch name {
		case "info":
			continue
		case "evalsha", "eval":
			scripts += d
		}
		cmds += d
		if d > 0 {
			each[name] = float64(d) / float64(items)
		}
	}
	if os.Getenv("QUEUE_CMDS") != "" {
		b.Logf("commands per item: %v", each)
	}
	b.ReportMetric(float64(cmds)/float64(items), "cmds/item")
	b.ReportMetric(float64(scripts)/float64(items), "scripts/item")
}

// latenessItems is how many delayed items one lateness run offers.
const latenessItems = 300

// delivered is a job and when a consumer got it.
type delivered struct {
	job benchqueues.Job
	at  time.Time
}

// lateness offers latenessItems jobs due after random delays of 0-2s
// through offer, collects their deliveries from deliveries, and reports
// the p50 and p99 of how late after due they came.
func lateness(b *testing.B, offer func(j benchqueues.Job, delay time.Duration) error, deliveries <-chan delivered) {
	var late []time.Duration
	for range b.N {
		for i := range latenessItems {
			delay := time.Duration(rand.Int64N(int64(2 * time.Second)))
			if err := offer(benchqueues.Job{N: i, Due: time.Now().Add(delay).UnixNano()}, delay); err != nil {
				b.Fatal(err)
			}
			time.Sleep(3 * time.Millisecond)
		}
		timeout := time.After(time.Minute)
		for range latenessItems {
			select {
			case d := <-deliveries:
				late = append(late, time.Duration(d.at.UnixNano()-d.job.Due))
			case <-timeout:
				b.Fatalf("only %d of %d delayed items delivered", len(late), latenessItems)
			}
		}
	}
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(late[len(late)*99/100])/1e6, "p99-ms")
	b.ReportMetric(float64(late[len(late)-1])/1e6, "max-ms")
}

func BenchmarkDelayLateness(b *testing.B) {
	b.Run("lockgen", func(b *testing.B) {
		flush(b)
		run := fmt.Sprint(time.Now().UnixNano())
		cs := queueClients(b, 3)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		deliveries := make(chan delivered, latenessItems)
		for _, c := range cs[1:] { // two consumer clients, whose timers race
			q := benchqueues.NewQueues(c).Later(run)
			if err := q.Start(ctx); err != nil {
				b.Fatal(err)
			}
			for range consumers / 2 {
				go func() {
					for {
						j, err := q.Take(ctx)
						if err != nil {
							return
						}
						deliveries <- delivered{j, time.Now()}
					}
				}()
			}
		}
		q := benchqueues.NewQueues(cs[0]).Later(run)
		lateness(b, func(j benchqueues.Job, delay time.Duration) error { return q.OfferIn(ctx, j, delay) }, deliveries)
	})
	b.Run("asynq", func(b *testing.B) {
		flush(b)
		opt := asynq.RedisClientOpt{Addr: node.Addr}
		deliveries := make(chan delivered, latenessItems)
		srv := asynq.NewServer(opt, asynq.Config{Concurrency: consumers, LogLevel: asynq.FatalLevel})
		if err := srv.Start(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
			var j benchqueues.Job
			if err := json.Unmarshal(t.Payload(), &j); err != nil {
				return errors.Join(err, asynq.SkipRetry)
			}
			deliveries <- delivered{j, time.Now()}
			return nil
		})); err != nil {
			b.Fatal(err)
		}
		defer srv.Shutdown()
		client := asynq.NewClient(opt)
		defer client.Close()
		lateness(b, func(j benchqueues.Job, delay time.Duration) error {
			payload, _ := json.Marshal(j)
			_, err := client.Enqueue(asynq.NewTask("job", payload), asynq.ProcessIn(delay), asynq.MaxRetry(0))
			return err
		}, deliveries)
	})
}
