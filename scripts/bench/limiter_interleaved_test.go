package bench

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkLimiterInterleaved is BenchmarkLimiterAllow and
// BenchmarkLimiterAllowParallel for a machine shared with other work, in
// the shape of BenchmarkUncontendedInterleaved: each round times every
// library's Allow serially (100 each, in a new random order operation by
// operation) and in parallel (GOMAXPROCS x 4 goroutines on one client
// each, 50 decisions per goroutine, the libraries in a new random order),
// so that load elsewhere hits them alike, and reports the medians over
// the rounds of each one's µs per decision and of its decisions per
// second as a ratio to redis_rate's in the same round (issue 27: >= 1.0;
// <lib>/redis_rate for serial, <lib>/redis_rate-par for parallel).
// Before the rounds, 5 passes of 400 decisions of each, one library after
// the other, count Redis commands (INFO stats; the scripts' inside
// included), allocations (the whole process) and redis-server CPU per
// decision: INFO cpu's used_cpu_sys+user (-redis-cpu-µs/op, the medians
// of the passes; this process's getrusage: -client-cpu-µs/op) and the µs INFO commandstats gives EVALSHA (the whole
// script, with its commands: -evalsha-µs/op). Every library uses the
// keys of limiterIDs, each well under its rate: every decision is an
// allowed one, the full write path; each key is used once before the
// passes, so they count limiters in use, not their first decision. Run it with -benchtime 100x for 100
// rounds:
//
//	go test -run '^$' -bench LimiterInterleaved -benchtime 100x
func BenchmarkLimiterInterleaved(b *testing.B) {
	flush(b)
	ids := limiterIDs()
	ctx := context.Background()
	names := make([]string, len(limiterLibs))
	allows := make([]func(context.Context, string) (bool, error), len(limiterLibs))
	peer := -1
	for i, lib := range limiterLibs {
		names[i], allows[i] = lib.name, lib.open(b, newRedis(b))
		if lib.name == "redis_rate" {
			peer = i
		}
	}
	var denied sync.Map // library -> true: a decision was denied
	n := make([]int, len(allows))
	run := func(i, k int) {
		ok, err := allows[i](ctx, ids[k%numKeys])
		if err != nil {
			b.Fatal(err)
		}
		if !ok {
			denied.Store(names[i], true)
		}
	}

	// Every key used once first: the counts are of a limiter in use (the
	// first decision on a key writes its config, once a minute at most).
	for i := range allows {
		for k := range numKeys {
			run(i, k)
		}
		n[i] = numKeys
	}

	const passes, counted = 5, 400
	count := commandCounter(b)
	var ms runtime.MemStats
	cmds, allocs := make([]int64, len(allows)), make([]uint64, len(allows))
	serverCPU, evalUS := make([][]float64, len(allows)), make([][]float64, len(allows))
	clientCPU := make([][]float64, len(allows))
	for pass := range passes {
		for k := range allows {
			i := (pass + k) % len(allows)
			runtime.ReadMemStats(&ms)
			st0, s0 := commandTable(b), redisCPU(b)
			c0, a0, p0 := count(), ms.Mallocs, selfCPU(b)
			for range counted {
				run(i, n[i])
				n[i]++
			}
			p1, c1 := selfCPU(b), count()
			clientCPU[i] = append(clientCPU[i], float64(p1-p0)/counted/float64(time.Microsecond))
			serverCPU[i] = append(serverCPU[i], float64(redisCPU(b)-s0)/counted/float64(time.Microsecond))
			runtime.ReadMemStats(&ms)
			cmds[i] += c1 - c0 - 1 // less the first count's INFO
			allocs[i] += ms.Mallocs - a0
			st1 := commandTable(b)
			evalUS[i] = append(evalUS[i], (st1["evalsha"].usec-st0["evalsha"].usec)/counted)
		}
	}

	const serial, goroutinesPer, parallelOps = 100, 4, 50
	goroutines := runtime.GOMAXPROCS(0) * goroutinesPer
	order := make([]int, len(allows))
	for i := range order {
		order[i] = i
	}
	serialUS, parUS := make([][]float64, len(allows)), make([][]float64, len(allows))
	sum := make([]time.Duration, len(allows))
	for b.Loop() {
		clear(sum)
		for range serial {
			rand.Shuffle(len(order), func(x, y int) { order[x], order[y] = order[y], order[x] })
			for _, i := range order {
				start := time.Now()
				run(i, n[i])
				sum[i] += time.Since(start)
				n[i]++
			}
		}
		for i := range allows {
			serialUS[i] = append(serialUS[i], float64(sum[i])/serial/float64(time.Microsecond))
		}
		rand.Shuffle(len(order), func(x, y int) { order[x], order[y] = order[y], order[x] })
		for _, i := range order {
			var wg sync.WaitGroup
			base := n[i]
			start := time.Now()
			for g := range goroutines {
				wg.Go(func() {
					for k := range parallelOps {
						run(i, base+g*parallelOps+k)
					}
				})
			}
			wg.Wait()
			d := time.Since(start)
			n[i] += goroutines * parallelOps
			parUS[i] = append(parUS[i], float64(d)/float64(goroutines*parallelOps)/float64(time.Microsecond))
		}
	}
	for i, name := range names {
		if i != peer && peer >= 0 {
			var ser, par []float64
			for k := range serialUS[i] {
				ser = append(ser, serialUS[peer][k]/serialUS[i][k])
				par = append(par, parUS[peer][k]/parUS[i][k])
			}
			b.ReportMetric(median(ser), name+"/redis_rate")
			b.ReportMetric(median(par), name+"/redis_rate-par")
		}
		b.ReportMetric(median(serialUS[i]), name+"-µs/op")
		b.ReportMetric(median(parUS[i]), name+"-par-µs/op")
		b.ReportMetric(float64(cmds[i])/passes/counted, name+"-cmds/op")
		b.ReportMetric(float64(allocs[i])/passes/counted, name+"-allocs/op")
		b.ReportMetric(median(serverCPU[i]), name+"-redis-cpu-µs/op")
		b.ReportMetric(median(clientCPU[i]), name+"-client-cpu-µs/op")
		b.ReportMetric(median(evalUS[i]), name+"-evalsha-µs/op")
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		denied.Range(func(k, _ any) bool { return yield(k.(string)) })
	}) {
		b.Logf("%s denied a decision: not every decision was the full write path", name)
	}
}
