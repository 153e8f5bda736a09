package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchlimits"
)

// allower is one rate limiter library under benchmark: allow one request
// on the limiter of id.
type allower struct {
	name string
	open func(tb testing.TB, rdb *redis.Client) func(ctx context.Context, id string) (bool, error)
}

// limiterLibs are the libraries of the limiter benchmarks, all with 100
// requests per second in bursts of up to 100 (see benchlimits/lockgen.yaml).
var limiterLibs = []allower{
	{"lockgen-gcra", openLimiter((*benchlimits.Limiters).GCRA)},
	{"lockgen-token-bucket", openLimiter((*benchlimits.Limiters).Bucket)},
	{"lockgen-sliding-window", openLimiter((*benchlimits.Limiters).Window)},
	{"redis_rate", openRedisRate},
}

func openLimiter(which func(*benchlimits.Limiters, string) *lockrt.Limiter) func(testing.TB, *redis.Client) func(context.Context, string) (bool, error) {
	return func(tb testing.TB, rdb *redis.Client) func(context.Context, string) (bool, error) {
		c := lockrt.New(rdb)
		tb.Cleanup(func() { c.Close() })
		if err := benchlimits.Preload(context.Background(), c); err != nil {
			tb.Fatal(err)
		}
		limits := benchlimits.NewLimiters(c)
		return func(ctx context.Context, id string) (bool, error) {
			r, err := which(limits, id).Allow(ctx)
			return r.Allowed, err
		}
	}
}

func openRedisRate(tb testing.TB, rdb *redis.Client) func(context.Context, string) (bool, error) {
	l := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Second}
	ctx := context.Background()
	// Load its script, as the lockgen limiters' Preload does.
	if _, err := l.Allow(ctx, "warm-up", limit); err != nil {
		tb.Fatal(err)
	}
	return func(ctx context.Context, id string) (bool, error) {
		r, err := l.Allow(ctx, "redis_rate:"+id, limit)
		if err != nil {
			return false, err
		}
		return r.Allowed > 0, nil
	}
}

// limiterIDs are the keys the benchmarks cycle through: each gets a
// request every numKeys operations, well under its rate, so every request
// is allowed and every library does its full write path.
func limiterIDs() []string {
	ids := make([]string, numKeys)
	for i := range ids {
		ids[i] = "l" + strconv.Itoa(i)
	}
	return ids
}

// BenchmarkLimiterAllow: one goroutine asks b.N times for one request.
// Reports the commands (those the scripts run included), round trips and
// redis-server CPU time per decision.
func BenchmarkLimiterAllow(b *testing.B) {
	flush(b)
	ids := limiterIDs()
	ctx := context.Background()
	for _, lib := range limiterLibs {
		b.Run(lib.name, func(b *testing.B) {
			rdb := newRedis(b)
			allow := lib.open(b, rdb)
			h := &roundTrips{}
			rdb.AddHook(h)
			count := commandCounter(b)
			b.ReportAllocs()
			cpu := redisCPU(b)
			before := count()
			i := 0
			for ; b.Loop(); i++ {
				ok, err := allow(ctx, ids[i%numKeys])
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					b.Fatalf("request %d denied", i)
				}
			}
			b.ReportMetric(float64(count()-before-1)/float64(i), "cmds/op")
			b.ReportMetric(float64((redisCPU(b)-cpu).Microseconds())/float64(i), "redis-µs/op")
			b.ReportMetric(float64(h.trips.Load())/float64(i), "trips/op")
		})
	}
}

// BenchmarkLimiterAllowParallel: GOMAXPROCS x 4 goroutines ask at once,
// on one client each library; the throughput of one process.
func BenchmarkLimiterAllowParallel(b *testing.B) {
	flush(b)
	ids := limiterIDs()
	for _, lib := range limiterLibs {
		b.Run(lib.name, func(b *testing.B) {
			allow := lib.open(b, newRedis(b))
			b.SetParallelism(4)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				i := 0
				for pb.Next() {
					if _, err := allow(ctx, ids[i%numKeys]); err != nil {
						b.Error(err)
						return
					}
					i += 7
				}
			})
		})
	}
}

// TestLimiterPeersAgree: on a fresh key, every library allows the same
// burst of 100 and then denies: the benchmarks compare like with like.
func TestLimiterPeersAgree(t *testing.T) {
	flush(t)
	ctx := context.Background()
	for _, lib := range limiterLibs {
		t.Run(lib.name, func(t *testing.T) {
			allow := lib.open(t, newRedis(t))
			n := 0
			start := time.Now()
			for ; n < 200; n++ {
				ok, err := allow(ctx, "agree")
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
			}
			// 100 at once, plus what the rate (100/s) refilled meanwhile:
			// a loaded machine may take tens of ms over the burst.
			refilled := int(time.Since(start)/(10*time.Millisecond)) + 1
			if n < 100 || n > 100+refilled {
				t.Errorf("%d requests allowed in a burst, want 100 (+ at most %d refilled meanwhile)", n, refilled)
			}
		})
	}
}
