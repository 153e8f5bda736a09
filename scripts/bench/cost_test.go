package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestHandoffCost logs, for each library of BenchmarkHandoff, what one
// acquisition costs: the commands Redis ran (those of scripts included),
// and the CPU time of redis-server and of this process. Run it with -v.
func TestHandoffCost(t *testing.T) {
	const n = 300
	for _, lib := range handoffLibs {
		t.Run(lib.name, func(t *testing.T) {
			ls := openN(t, lib, contenders)
			before, redis0, self0 := commandStats(t), redisCPU(t), selfCPU(t)
			res, err := handoff(ls, "cost", n)
			if err != nil {
				t.Fatal(err)
			}
			after, redis1, self1 := commandStats(t), redisCPU(t), selfCPU(t)
			var cmds []string
			for _, name := range slices.Sorted(maps.Keys(after)) {
				if d := after[name] - before[name]; d > 0 && name != "info" && name != "hello" && name != "client|setinfo" {
					cmds = append(cmds, fmt.Sprintf("%s %.2f", name, float64(d)/n))
				}
			}
			perOp := func(d time.Duration) float64 { return float64(d) / n / float64(time.Microsecond) }
			p50, p99, xp50, xp99, self := res.stats()
			t.Logf("%s per acquisition: %s; CPU µs: redis %.0f, clients %.0f; hand-off µs: p50 %.0f p99 %.0f, to another client p50 %.0f p99 %.0f; self %.0f%%",
				lib.name, strings.Join(cmds, ", "), perOp(redis1-redis0), perOp(self1-self0), p50, p99, xp50, xp99, self)
		})
	}
}

// commandStats returns the calls of each command node has run (scripts'
// commands included), from INFO commandstats.
func commandStats(tb testing.TB) map[string]int64 {
	stats := map[string]int64{}
	for name, c := range commandTable(tb) {
		stats[name] = c.calls
	}
	return stats
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  float64 // the µs Redis spent in it (a script's: with the commands it called)
}

// commandTable returns node's INFO commandstats by command name.
func commandTable(tb testing.TB) map[string]cmdStat {
	return parseCommandStats(tb, info(tb, "commandstats"))
}

// parseCommandStats returns an INFO commandstats reply by command name.
func parseCommandStats(tb testing.TB, infoStats string) map[string]cmdStat {
	stats := map[string]cmdStat{}
	for line := range strings.Lines(infoStats) {
		// cmdstat_evalsha:calls=12,usec=345,usec_per_call=...
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		calls, rest, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		usec, _, _ := strings.Cut(strings.TrimPrefix(rest, "usec="), ",")
		u, err := strconv.ParseFloat(usec, 64)
		if err != nil {
			tb.Fatal(err)
		}
		stats[name] = cmdStat{calls: n, usec: u}
	}
	return stats
}

// redisCPU returns the CPU time redis-server has used.
func redisCPU(tb testing.TB) time.Duration { return parseCPU(tb, info(tb, "cpu")) }

// nodeCPU returns the CPU time the redis-server of rdb has used.
func nodeCPU(tb testing.TB, rdb *redis.Client) time.Duration {
	s, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	return parseCPU(tb, s)
}

// parseCPU returns the CPU time (user + system) an INFO cpu reply states.
func parseCPU(tb testing.TB, infoCPU string) time.Duration {
	var total time.Duration
	for line := range strings.Lines(infoCPU) {
		for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, field); ok {
				s, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					tb.Fatal(err)
				}
				total += time.Duration(s * float64(time.Second))
			}
		}
	}
	return total
}

// selfCPU returns the CPU time this process has used.
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// infoClient asks node for INFO, one client for the whole run (a client
// per call left hundreds of idle clients behind in a benchmark's rounds).
var (
	infoOnce   sync.Once
	infoClient *redis.Client
)

func info(tb testing.TB, section string) string {
	infoOnce.Do(func() { infoClient = redis.NewClient(&redis.Options{Addr: node.Addr}) })
	s, err := infoClient.Info(context.Background(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
