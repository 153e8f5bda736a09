package bench

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkUncontendedInterleaved is BenchmarkUncontended and
// BenchmarkRoundTrip for a machine shared with other work: each round
// runs PING and every library in turns, 500 operations each, so that a
// burst of load elsewhere hits them all alike. It reports the median over
// the rounds of each one's µs/op (run it with -benchtime 40x for 40
// rounds):
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
	r := 0
	for ; b.Loop(); r++ {
		for i, op := range ops {
			start := time.Now()
			for j := range per {
				if err := op(r*per + j); err != nil {
					b.Fatal(err)
				}
			}
			us[i] = append(us[i], float64(time.Since(start))/per/float64(time.Microsecond))
		}
	}
	for i, name := range names {
		slices.Sort(us[i])
		b.ReportMetric(us[i][len(us[i])/2], name+"-µs/op")
	}
}
