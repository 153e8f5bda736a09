package bench

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"testing"
)

// uncontendedLibs are the libraries of BenchmarkUncontended, with their
// default retry policies: nobody else holds the keys.
var uncontendedLibs = []lib{lockgenReentrant, lockgenSimple, redsyncDefault, redislockDefault}

// numKeys is how many keys BenchmarkUncontended cycles through: each lock
// is on a key nobody has held for numKeys-1 operations.
const numKeys = 1024

// uncontended returns one operation of BenchmarkUncontended for lib: lock
// and unlock the i-th key.
func uncontended(tb testing.TB, lib lib, rdb *redis.Client) func(i int) error {
	l := lib.open(tb, rdb)
	ids := make([]string, numKeys)
	for i := range ids {
		ids[i] = "u" + strconv.Itoa(i)
	}
	ctx := context.Background()
	return func(i int) error {
		if err := l.lock(ctx, ids[i%numKeys]); err != nil {
			return err
		}
		return l.unlock(ctx)
	}
}

// BenchmarkUncontended: one goroutine locks and unlocks, b.N times, keys
// that nobody else holds.
func BenchmarkUncontended(b *testing.B) {
	flush(b)
	for _, lib := range uncontendedLibs {
		b.Run(lib.name, func(b *testing.B) {
			op := uncontended(b, lib, newRedis(b))
			b.ReportAllocs()
			count := commandCounter(b)
			before := count()
			i := 0
			for ; b.Loop(); i++ {
				if err := op(i); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(count()-before-1)/float64(i), "cmds/op")
		})
	}
}

// commandCounter returns a function that returns the number of commands
// node has processed so far: since the previous call, that is the
// commands sent meanwhile and the previous call's INFO.
func commandCounter(tb testing.TB) func() int64 {
	rdb := newRedis(tb)
	return func() int64 {
		info, err := rdb.Info(context.Background(), "stats").Result()
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					tb.Fatal(err)
				}
				return n
			}
		}
		tb.Fatal("INFO stats lacks total_commands_processed")
		return 0
	}
}

// BenchmarkRoundTrip: one PING, the cost of one round trip; an
// uncontended Lock+Unlock needs two.
func BenchmarkRoundTrip(b *testing.B) {
	rdb := newRedis(b)
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
