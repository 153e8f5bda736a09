package bench

import (
	"context"
	"log"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/scripts/redistest"
)

// node is the one redis-server every test and benchmark runs against.
var node *redistest.Node

func TestMain(m *testing.M) {
	if addr := os.Getenv(pingerEnv); addr != "" {
		os.Exit(pinger(addr)) // the watchdog benchmark's other process
	}
	if job := os.Getenv(herdChildEnv); job != "" {
		os.Exit(herdChild(job)) // a locker of the process herd
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if node, err = redistest.Start(); err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	return m.Run()
}

// newRedis returns a new go-redis client of node, with default options,
// closed when tb ends.
func newRedis(tb testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// flush empties node, so that runs do not see each other's keys.
func flush(tb testing.TB) {
	if err := newRedis(tb).FlushAll(context.Background()).Err(); err != nil {
		tb.Fatal(err)
	}
}
