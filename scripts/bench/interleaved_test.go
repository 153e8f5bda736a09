package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/templates"
)

// BenchmarkUncontendedInterleaved is BenchmarkUncontended and
// BenchmarkRoundTrip for a machine shared with other work: each round
// runs PING and every library in turns, 500 operations each, so that a
// burst of load elsewhere hits them all alike. It reports the median over
// the rounds of each one's µs/op, of lockgen's ratio to redislock in the
// same round (issue 11: <= 1.0; also lockgen-simple's and lockgen-calls'), and each library's Redis commands
// (INFO stats) and allocations (runtime.MemStats, the whole process) per
// operation. The row lockgen-calls sends the reentrant lock's two calls
// as the runtime sends them (same scripts, keys and arguments) straight
// through go-redis: what those calls cost without the runtime, so that
// lockgen's row minus it is the runtime's own cost (the lease, its
// context, the watchdog, the generated key). It also reports each one's CPU time per operation, medians
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
	names = append(names, "lockgen-calls")
	ops = append(ops, uncontendedCalls(b, newRedis(b)))
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
		if name == lockgenReentrant.name || name == lockgenSimple.name || name == "lockgen-calls" {
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

// uncontendedCalls returns an operation that sends the two calls of an
// uncontended Lock+Unlock of the benchmarks' reentrant lock as the
// runtime sends them (reentrant_acquire with the lock's and its
// registry's keys, lease, owner and registry TTL; reentrant_release of a
// fast-path hold with the lock's key, owner and lease), without the
// runtime, on keys of their own.
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
	leaseMS, regMS := lease.Milliseconds(), lockrt.RegistryTTL.Milliseconds()
	const client = "0123456789abcdef0123456789abcdef:" // a runtime client's id
	return func(i int) error {
		k := "bench:{Resource:res:c" + strconv.Itoa(i%numKeys) + "}"
		owner := client + strconv.Itoa(i)
		if n, err := rdb.Do(ctx, "evalsha", sha[0], 3, k, k+":queue", k+":waiters", leaseMS, owner, regMS).Int(); err != nil || n != 1 {
			return fmt.Errorf("lockgen-calls: acquire replied %d, %v", n, err)
		}
		if n, err := rdb.Do(ctx, "evalsha", sha[1], 1, k, owner, leaseMS).Int(); err != nil || n != 0 {
			return fmt.Errorf("lockgen-calls: release replied %d, %v", n, err)
		}
		return nil
	}
}
