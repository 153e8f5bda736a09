package bench

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

// TestUncontendedInterleaved is BenchmarkUncontended and
// BenchmarkRoundTrip for a machine shared with other work: it runs the
// libraries and PING in turns, 500 operations each, 40 rounds, so that a
// burst of load elsewhere hits them all alike, and logs the minimum,
// first quartile and median of their per-round µs/op. It runs only when
// BENCH_INTERLEAVED is set:
//
//	BENCH_INTERLEAVED=1 go test -run Interleaved -v
func TestUncontendedInterleaved(t *testing.T) {
	if os.Getenv("BENCH_INTERLEAVED") == "" {
		t.Skip("set BENCH_INTERLEAVED=1 to run")
	}
	rdb := newRedis(t)
	ctx := context.Background()
	names := []string{"PING"}
	ops := []func(int) error{func(int) error { return rdb.Ping(ctx).Err() }}
	for _, lib := range uncontendedLibs {
		names = append(names, lib.name)
		ops = append(ops, uncontended(t, lib, newRedis(t)))
	}
	const rounds, per = 40, 500
	us := make([][]float64, len(ops))
	for r := range rounds {
		for i, op := range ops {
			start := time.Now()
			for j := range per {
				if err := op(r*per + j); err != nil {
					t.Fatal(err)
				}
			}
			us[i] = append(us[i], float64(time.Since(start))/per/float64(time.Microsecond))
		}
	}
	for i, name := range names {
		slices.Sort(us[i])
		t.Logf("%-15s µs/op: min %6.1f  p25 %6.1f  median %6.1f", name, us[i][0], us[i][rounds/4], us[i][rounds/2])
	}
}
