package bench

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchred"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// The RedLock benchmarks run on five independent redis-server nodes of
// their own (not the shared node): lockgen's redlock kind, through the
// code generated from benchred/lockgen.yaml (fixed 30s lease, like
// redsync's expiry), against redsync over five go-redis pools.

// redNodes is how many independent nodes a RedLock spans.
const redNodes = 5

// redLib is one RedLock library: it opens a locker over the nodes.
type redLib struct {
	name string
	open func(tb testing.TB, nodes []*redistest.Node) locker
}

var (
	lockgenRed    = redLib{"lockgen", openLockgenRed}
	redsyncRed    = redLib{"redsync", openRedsyncRed()}
	redsyncRed1ms = redLib{"redsync-1ms", openRedsyncRed(redsync.WithRetryDelay(time.Millisecond))}
)

// redClients returns a go-redis client (default options) per node,
// closed when tb ends.
func redClients(tb testing.TB, nodes []*redistest.Node) []*redis.Client {
	rdbs := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: n.Addr})
		tb.Cleanup(func() { rdbs[i].Close() })
	}
	return rdbs
}

type lockgenRedLocker struct {
	red   *benchred.RedLocks
	lease *lockrt.RedLockLease
}

func openLockgenRed(tb testing.TB, nodes []*redistest.Node) locker {
	var clients []*lockrt.Client
	for i, rdb := range redClients(tb, nodes) {
		c := lockrt.New(rdb)
		tb.Cleanup(func() { c.Close() })
		if nodes[i].Running() {
			if err := benchred.Preload(context.Background(), c); err != nil {
				tb.Fatal(err)
			}
		}
		clients = append(clients, c)
	}
	return &lockgenRedLocker{red: benchred.NewRedLocks(clients...)}
}

func (l *lockgenRedLocker) lock(ctx context.Context, id string) (err error) {
	l.lease, err = l.red.Job(id).Lock(ctx)
	return err
}

func (l *lockgenRedLocker) unlock(ctx context.Context) error { return l.lease.Unlock(ctx) }

func openRedsyncRed(opts ...redsync.Option) func(testing.TB, []*redistest.Node) locker {
	opts = append([]redsync.Option{redsync.WithExpiry(lease), redsync.WithTries(1 << 30)}, opts...)
	return func(tb testing.TB, nodes []*redistest.Node) locker {
		var pools []redsyncredis.Pool
		for _, rdb := range redClients(tb, nodes) {
			pools = append(pools, goredis.NewPool(rdb))
		}
		l := &redsyncLocker{rs: redsync.New(pools...), opts: opts}
		warmUp(tb, l)
		return l
	}
}

// BenchmarkRedLockUncontended: one goroutine takes and releases a RedLock
// on five nodes b.N times, cycling through 1024 keys; then again with two
// of the five nodes stopped (-2down).
func BenchmarkRedLockUncontended(b *testing.B) {
	for _, down := range []int{0, 2} {
		nodes := redistest.Independent(b, redNodes)
		for _, n := range nodes[:down] {
			if err := n.Stop(); err != nil {
				b.Fatal(err)
			}
		}
		for _, lib := range []redLib{lockgenRed, redsyncRed} {
			name := lib.name
			if down > 0 {
				name = fmt.Sprintf("%s-%ddown", lib.name, down)
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				l := lib.open(b, nodes)
				b.ResetTimer()
				for i := range b.N {
					if err := l.lock(ctx, fmt.Sprintf("u%d", i%1024)); err != nil {
						b.Fatal(err)
					}
					if err := l.unlock(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRedLockHandoff: four clients (each with its own five
// connections) take turns on one RedLock, b.N acquisitions in all; the
// metrics are BenchmarkHandoff's.
func BenchmarkRedLockHandoff(b *testing.B) {
	const contenders = 4
	nodes := redistest.Independent(b, redNodes)
	for _, lib := range []redLib{lockgenRed, redsyncRed, redsyncRed1ms} {
		b.Run(lib.name, func(b *testing.B) {
			ls := make([]locker, contenders)
			for i := range ls {
				ls[i] = lib.open(b, nodes)
			}
			b.ResetTimer()
			res, err := handoff(ls, fmt.Sprintf("h%d", b.N), b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			p50, p99, xp50, xp99, self := res.stats()
			b.ReportMetric(p50, "p50-µs")
			b.ReportMetric(p99, "p99-µs")
			if !math.IsNaN(xp50) {
				b.ReportMetric(xp50, "xp50-µs")
				b.ReportMetric(xp99, "xp99-µs")
			}
			b.ReportMetric(self, "self-%")
			b.ReportMetric(float64(b.N)/res.elapsed.Seconds(), "ops/s")
		})
	}
}

// TestRedLockHandoff runs BenchmarkRedLockHandoff's operation for a few
// hand-offs with lockgen and redsync-1ms.
func TestRedLockHandoff(t *testing.T) {
	const n = 16
	nodes := redistest.Independent(t, redNodes)
	for _, lib := range []redLib{lockgenRed, redsyncRed1ms} {
		t.Run(lib.name, func(t *testing.T) {
			ls := []locker{lib.open(t, nodes), lib.open(t, nodes), lib.open(t, nodes)}
			res, err := handoff(ls, "test-"+lib.name, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.handoffs) != n-1 {
				t.Fatalf("%d hand-offs, want %d", len(res.handoffs), n-1)
			}
			p50, p99, _, _, self := res.stats()
			t.Logf("%s: p50 %.0fµs p99 %.0fµs, self %.0f%%", lib.name, p50, p99, self)
		})
	}
}

// redHerdLibs are the libraries of BenchmarkHerdRedLock: lockgen's
// RedLock (a waiter registry on each node, a release wakes one waiter per
// node) against redsync at its default retry (50-250ms at random) and
// retrying every 1ms.
var redHerdLibs = []redLib{lockgenRed, redsyncRed, redsyncRed1ms}

// BenchmarkHerdRedLock is BenchmarkHerd on a RedLock over 3 independent
// nodes: N = 8, 32, 64 clients (each with go-redis clients of its own,
// and for lockgen runtime clients of its own) loop lock, a 1ms hold,
// unlock on one RedLock, 1000 acquisitions per run, the libraries in
// rotated order per round; medians of the rounds (-benchtime 3x or
// more). Scripts and commands per acquisition are INFO commandstats
// summed over the 3 nodes.
func BenchmarkHerdRedLock(b *testing.B) {
	nodes := redistest.Independent(b, 3)
	admins := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		admins[i] = n.Client()
	}
	names := make([]string, len(redHerdLibs))
	for i, rl := range redHerdLibs {
		names[i] = rl.name
	}
	for _, n := range []int{8, 32, 64} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			lockers := make([][]locker, len(redHerdLibs))
			for i, rl := range redHerdLibs {
				for range n {
					l := rl.open(b, nodes)
					warmUp(b, l)
					lockers[i] = append(lockers[i], l)
				}
			}
			runs := herdRounds(b, lockers, fmt.Sprintf("rherd%d", n), time.Millisecond, func() map[string]int64 { return nodesStats(b, admins) })
			reportHerd(b, fmt.Sprintf("redlock N=%d", n), names, runs, false)
		})
	}
}
