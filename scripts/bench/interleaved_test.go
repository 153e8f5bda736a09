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
// operation (run it with -benchtime 40x for 40 rounds):
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
	cmds, allocs := make([]int64, len(ops)), make([]uint64, len(ops))
	count := commandCounter(b)
	var ms runtime.MemStats
	r := 0
	for ; b.Loop(); r++ {
		for i, op := range ops {
			runtime.ReadMemStats(&ms)
			c0, a0 := count(), ms.Mallocs
			start := time.Now()
			for j := range per {
				if err := op(r*per + j); err != nil {
					b.Fatal(err)
				}
			}
			us[i] = append(us[i], float64(time.Since(start))/per/float64(time.Microsecond))
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
		b.ReportMetric(float64(cmds[i])/ops, name+"-cmds/op")
		b.ReportMetric(float64(allocs[i])/ops, name+"-allocs/op")
	}
}
