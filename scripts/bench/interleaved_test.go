package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchsems"
	"github.com/lockgen/lockgen/templates"
)

// BenchmarkUncontendedInterleaved is BenchmarkUncontended and
// BenchmarkRoundTrip for a machine shared with other work. Each round
// runs 100 times PING and every library's Lock+Unlock once each, in a new
// random order every time, timing each operation: a burst of load
// elsewhere, a neighbour's garbage or cold caches hit them all alike, so
// the ratio of two libraries' times in a round moves far less than their
// times do (runs of 500 operations per library in turns, as this
// benchmark did before 2026-11-26's third session, put lockgen at 0.98 to
// 1.07x redislock on one commit; this shape puts it within 0.01). It
// reports the median over the rounds of each one's µs/op and of lockgen's
// ratio to redislock in the same round (issue 11: <= 1.0; also
// lockgen-simple's and lockgen-calls'). Before the rounds, 5 passes of
// 400 operations of each, one after the other, count their Redis commands
// (INFO stats) and allocations (runtime.MemStats, the whole process) per
// operation, and their CPU time, medians of the passes: the benchmark
// process's (getrusage, user + system: the client side) and
// redis-server's (INFO cpu), noisier than the interleaved times. The row
// lockgen-calls sends the reentrant lock's two calls as the runtime sends
// them (same scripts, keys and arguments) straight through go-redis: what
// those calls cost without the runtime, so that lockgen's row minus it is
// the runtime's own cost (the lease, its context, the watchdog, the
// generated key). Run it with -benchtime 200x for 200 rounds:
//
//	go test -run '^$' -bench UncontendedInterleaved -benchtime 200x
func BenchmarkUncontendedInterleaved(b *testing.B) {
	rdb := newRedis(b)
	ctx := context.Background()
	names := []string{"PING"}
	ops := []func(int) error{func(int) error { return rdb.Ping(ctx).Err() }}
	for _, lib := range uncontendedLibs {
		names = append(names, lib.name)
		ops = append(ops, uncontended(b, lib, newRedis(b)))
	}
	names = append(names, "lockgen-calls")
	ops = append(ops, uncontendedCalls(b, newRedis(b)))
	interleaved(b, names, ops, lockgenReentrant.name, lockgenSimple.name, "lockgen-calls")
}

// BenchmarkUncontendedKindsInterleaved is BenchmarkUncontendedInterleaved
// for the other kinds (issue 27): an uncontended acquire+release of a
// fenced, a fair lock, each side of a read-write lock and one permit of a
// 3-permit semaphore (each on a key nobody holds, their 30s leases renewed
// by the watchdog), beside lockgen's reentrant lock and redislock, each
// reported as its ratio to redislock in the same round:
//
//	go test -run '^$' -bench UncontendedKindsInterleaved -benchtime 200x
func BenchmarkUncontendedKindsInterleaved(b *testing.B) {
	libs := []lib{lockgenReentrant, lockgenFenced, lockgenFair, lockgenWrite, lockgenRead, redislockDefault}
	var names []string
	var ops []func(int) error
	for _, lib := range libs {
		name := lib.name
		if !strings.HasPrefix(name, "lockgen") && !strings.HasPrefix(name, "redislock") {
			name = "lockgen-rw-" + name
		}
		names = append(names, name)
		ops = append(ops, uncontended(b, lib, newRedis(b)))
	}
	names = append(names, "lockgen-semaphore")
	ops = append(ops, uncontendedPermits(b, newRedis(b)))
	var rated []string
	for _, n := range names {
		if strings.HasPrefix(n, "lockgen") {
			rated = append(rated, n)
		}
	}
	interleaved(b, names, ops, rated...)
}

// uncontendedPermits returns an operation that takes and releases one
// permit of the benchmarks' 3-permit semaphore on the i-th key.
func uncontendedPermits(tb testing.TB, rdb *redis.Client) func(int) error {
	c := lockrt.New(rdb)
	tb.Cleanup(func() { c.Close() })
	if err := benchsems.Preload(context.Background(), c); err != nil {
		tb.Fatal(err)
	}
	sems := benchsems.NewSemaphores(c)
	ids := make([]string, numKeys)
	for i := range ids {
		ids[i] = "u" + strconv.Itoa(i)
	}
	ctx := context.Background()
	return func(i int) error {
		p, err := sems.Slots(ids[i%numKeys]).Acquire(ctx, 1)
		if err != nil {
			return err
		}
		return p.Release(ctx)
	}
}

// interleaved runs the operations ops (named names, a redislockDefault
// among them) in the interleaved shape of BenchmarkUncontendedInterleaved
// and reports each one's ratio to redislock for the names in rated.
func interleaved(b *testing.B, names []string, ops []func(int) error, rated ...string) {
	n := 0 // operations so far, each on a key of its own
	run := func(i int) {
		if err := ops[i](n); err != nil {
			b.Fatal(err)
		}
		n++
	}

	// The counts, one library after the other: commands and allocations
	// over every pass, CPU times as the median of the passes.
	const passes, counted = 5, 400
	count := commandCounter(b)
	var ms runtime.MemStats
	cmds, allocs := make([]int64, len(ops)), make([]uint64, len(ops))
	clientCPU, serverCPU := make([][]float64, len(ops)), make([][]float64, len(ops))
	for pass := range passes {
		for k := range ops {
			i := (pass + k) % len(ops) // each pass starts one further along
			runtime.ReadMemStats(&ms)
			c0, a0 := count(), ms.Mallocs
			s0, p0 := redisCPU(b), selfCPU(b)
			for range counted {
				run(i)
			}
			clientCPU[i] = append(clientCPU[i], float64(selfCPU(b)-p0)/counted/float64(time.Microsecond))
			serverCPU[i] = append(serverCPU[i], float64(redisCPU(b)-s0)/counted/float64(time.Microsecond))
			runtime.ReadMemStats(&ms)
			cmds[i] += count() - c0 - 1 // less the first count's INFO
			allocs[i] += ms.Mallocs - a0
		}
	}

	// The times, interleaved operation by operation.
	const per = 100
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	us := make([][]float64, len(ops))
	sum := make([]time.Duration, len(ops))
	for b.Loop() {
		clear(sum)
		for range per {
			rand.Shuffle(len(order), func(x, y int) { order[x], order[y] = order[y], order[x] })
			for _, i := range order {
				start := time.Now()
				run(i)
				sum[i] += time.Since(start)
			}
		}
		for i := range ops {
			us[i] = append(us[i], float64(sum[i])/per/float64(time.Microsecond))
		}
	}
	redislockAt := slices.Index(names, redislockDefault.name)
	for i, name := range names {
		if slices.Contains(rated, name) {
			var ratios []float64
			for k := range us[i] {
				ratios = append(ratios, us[i][k]/us[redislockAt][k])
			}
			b.ReportMetric(median(ratios), name+"/redislock")
		}
		b.ReportMetric(median(us[i]), name+"-µs/op")
		b.ReportMetric(float64(cmds[i])/passes/counted, name+"-cmds/op")
		b.ReportMetric(float64(allocs[i])/passes/counted, name+"-allocs/op")
		b.ReportMetric(median(clientCPU[i]), name+"-client-cpu-µs/op")
		b.ReportMetric(median(serverCPU[i]), name+"-redis-cpu-µs/op")
	}
}

// uncontendedCalls returns an operation that sends the two calls of an
// uncontended Lock+Unlock of the benchmarks' reentrant lock as the
// runtime sends them (reentrant_acquire with the lock's and its
// registry's keys, lease and owner; reentrant_release of a fast-path hold
// with the lock's key and owner), without the runtime, on keys of their
// own.
func uncontendedCalls(tb testing.TB, rdb *redis.Client) func(int) error {
	ctx := context.Background()
	var sha [2]string
	for i, name := range []string{"reentrant_acquire", "reentrant_release"} {
		src, err := templates.Source(name)
		if err != nil {
			tb.Fatal(err)
		}
		if sha[i], err = rdb.ScriptLoad(ctx, src).Result(); err != nil {
			tb.Fatal(err)
		}
	}
	leaseMS := lease.Milliseconds()
	const client = "0123456789abcdef0123456789abcdef:" // a runtime client's id
	return func(i int) error {
		k := "bench:{Resource:res:c" + strconv.Itoa(i%numKeys) + "}"
		owner := client + strconv.Itoa(i)
		if n, err := rdb.Do(ctx, "evalsha", sha[0], 3, k, k+":queue", k+":waiters", leaseMS, owner).Int(); err != nil || n != 1 {
			return fmt.Errorf("lockgen-calls: acquire replied %d, %v", n, err)
		}
		if n, err := rdb.Do(ctx, "evalsha", sha[1], 1, k, owner).Int(); err != nil || n != 0 {
			return fmt.Errorf("lockgen-calls: release replied %d, %v", n, err)
		}
		return nil
	}
}
