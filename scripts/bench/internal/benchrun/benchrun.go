// Package benchrun holds what the queue benchmarks of scripts/bench and
// scripts/bench/asynq26 share: runtime clients on a node, and producers
// that offer jobs.
package benchrun

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchqueues"
)

// Clients returns n runtime clients of the Redis at addr, each on a
// go-redis client of its own with default options, closed when tb ends.
func Clients(tb testing.TB, addr string, n int) []*lockrt.Client {
	cs := make([]*lockrt.Client, n)
	for i := range cs {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		cs[i] = lockrt.New(rdb)
		tb.Cleanup(func() { cs[i].Close(); rdb.Close() })
	}
	return cs
}

// Produce offers n jobs (N from 0 to n-1) from producers goroutines
// through offer, producer p the jobs p, p+producers, …, and returns once
// every one was offered or one failed (tb.Error).
func Produce(tb testing.TB, producers, n int, offer func(p int, j benchqueues.Job) error) {
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := p; i < n; i += producers {
				if err := offer(p, benchqueues.Job{N: i}); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Flush empties the Redis at addr, so that runs do not see each other's
// keys.
func Flush(tb testing.TB, addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		tb.Fatal(err)
	}
}
