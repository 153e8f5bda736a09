package bench

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkUncontendedInterleaved is BenchmarkUncontended and
// BenchmarkRoundTrip for a machine shared with other work: each round
// runs PING and every library in turns, 500 operations each, so that a
// burst of load elsewhere hits them all alike. It reports the median over
// the rounds of each one's µs/op, of lockgen's ratio to redislock in the
// same round (issue 11: <= 1.0), and each library's Redis commands
// (INFO stats) and allocations (runtime.MemStats, the whole process) per
// operation. It also reports each one's CPU time per operation, medians
// over the rounds: the benchmark process's (getrusage, user + system:
// the client side) and redis-server's (INFO cpu), which a burst of load
// elsewhere moves far less than the wall time (run it with -benchtime 40x
// for 40 rounds):
//
//	go test -run '^$' -bench UncontendedInterleaved -benchtime 40x
func BenchmarkUncontendedInterleaved(b *testing.B) {
	rdb := newRedis(b)
	ctx := context.Background()
	names := []string{"PING"}
	ops := []func(int) error{func(int) error { return rdb.Ping(ctx).Err() }}
	for _, lib := range uncontendedLibs {
		names = append(names, lib.name)
		ops = append(ops, uncontended(b, lib, newRedis(b)))
	}
	const per = 500
	us := make([][]float64, len(ops))
	clientCPU, serverCPU := make([][]float64, len(ops)), make([][]float64, len(ops))
	cmds, allocs := make([]int64, len(ops)), make([]uint64, len(ops))
	count := commandCounter(b)
	var ms runtime.MemStats
	r := 0
	for ; b.Loop(); r++ {
		// Each round starts one further along the list, so that no one
		// always runs after the same neighbour (its garbage, its warm
		// caches).
		for k := range ops {
			i := (r + k) % len(ops)
			op := ops[i]
			runtime.ReadMemStats(&ms)
			c0, a0 := count(), ms.Mallocs
			s0, p0 := redisCPU(b), selfCPU(b)
			start := time.Now()
			for j := range per {
				if err := op(r*per + j); err != nil {
					b.Fatal(err)
				}
			}
			us[i] = append(us[i], float64(time.Since(start))/per/float64(time.Microsecond))
			clientCPU[i] = append(clientCPU[i], float64(selfCPU(b)-p0)/per/float64(time.Microsecond))
			serverCPU[i] = append(serverCPU[i], float64(redisCPU(b)-s0)/per/float64(time.Microsecond))
			runtime.ReadMemStats(&ms)
			cmds[i] += count() - c0 - 1 // the first count's INFO
			allocs[i] += ms.Mallocs - a0
		}
	}
	redislockAt := slices.Index(names, redislockDefault.name)
	for i, name := range names {
		if name == lockgenReentrant.name || name == lockgenSimple.name {
			var ratios []float64
			for k := range us[i] {
				ratios = append(ratios, us[i][k]/us[redislockAt][k])
			}
			b.ReportMetric(median(ratios), name+"/redislock")
		}
		ops := float64(r * per)
		b.ReportMetric(median(us[i]), name+"-µs/op")
		b.ReportMetric(median(clientCPU[i]), name+"-client-cpu-µs/op")
		b.ReportMetric(median(serverCPU[i]), name+"-redis-cpu-µs/op")
		b.ReportMetric(float64(cmds[i])/ops, name+"-cmds/op")
		b.ReportMetric(float64(allocs[i])/ops, name+"-allocs/op")
	}
}
