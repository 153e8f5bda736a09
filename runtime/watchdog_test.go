package runtime_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// pipeHook records, for every pipeline a client sends, how many commands
// it carried, and the first key of each command (a renewal's lock key).
type pipeHook struct {
	mu      sync.Mutex
	sizes   []int
	renewed map[string]int
}

func newPipeHook() *pipeHook { return &pipeHook{renewed: map[string]int{}} }

func (h *pipeHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.sizes = append(h.sizes, len(cmds))
		for _, cmd := range cmds {
			// EVALSHA sha numkeys key ...
			if args := cmd.Args(); len(args) > 3 {
				h.renewed[fmt.Sprint(args[3])]++
			}
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// stats returns the pipelines so far, the largest one's commands, and how
// many of keys were renewed at least once.
func (h *pipeHook) stats(keys []string) (pipes, largest, renewed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.sizes {
		largest = max(largest, n)
	}
	for _, k := range keys {
		if h.renewed[k] > 0 {
			renewed++
		}
	}
	return len(h.sizes), largest, renewed
}

// lockMany takes n locks of d on c (keys key(t, "0") ... key(t, n-1)), from 8
// goroutines, and returns their keys and leases.
func lockMany(ctx context.Context, t *testing.T, c *lockrt.Client, d *lockrt.LockDef, n int) ([]string, []*lockrt.Lease) {
	t.Helper()
	keys := make([]string, n)
	leases := make([]*lockrt.Lease, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < n; i += 8 {
				keys[i] = key(t, strconv.Itoa(i))
				le, err := c.Lock(d, keys[i]).Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				leases[i] = le
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return keys, leases
}

// TestWatchdogBoundedPipelines: a client holding 5 000 locks renews them
// in pipelines of at most MaxPipeline commands, and renews every one of
// them (counted by a go-redis hook; no timing is asserted).
func TestWatchdogBoundedPipelines(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const locks = 5000
		rdb := b.new()
		defer rdb.Close()
		h := newPipeHook()
		rdb.AddHook(h)
		c := lockrt.New(rdb)
		defer c.Close()
		// A long lease: on a busy machine, under -race, taking 5 000
		// locks takes seconds, and renewing them all can take more than
		// a 10 s lease allows (beside two busy loops, once).
		d := def(t, lockrt.Reentrant, 30*time.Second, true, 0)
		keys, leases := lockMany(ctx, t, c, d, locks)
		eventually(t, 90*time.Second, func() bool {
			_, _, renewed := h.stats(keys)
			return renewed == locks
		}, "not every lock was renewed")
		pipes, largest, _ := h.stats(keys)
		t.Logf("%d locks renewed in %d pipelines, the largest of %d commands", locks, pipes, largest)
		if largest > lockrt.MaxPipeline {
			t.Fatalf("a renewal pipeline carried %d commands, want at most %d", largest, lockrt.MaxPipeline)
		}
		if pipes < locks/lockrt.MaxPipeline {
			t.Fatalf("%d pipelines renewed %d locks", pipes, locks)
		}
		for i, le := range leases {
			if err := le.Context().Err(); err != nil {
				t.Fatalf("lease %d lost: %v", i, context.Cause(le.Context()))
			}
		}
		for _, le := range leases {
			if err := le.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestRedLockWatchdog: 300 renewable RedLocks held through one quorum of
// three nodes are renewed by the quorum's watchdog: pipelines of at most
// MaxPipeline commands per node, every lock renewed on every node, and no
// goroutine per held lock. It does not run in parallel with other tests,
// which would move the goroutine count.
func TestRedLockWatchdog(t *testing.T) {
	ctx := context.Background()
	nodes := redistest.Independent(t, 3)
	hooks := make([]*pipeHook, len(nodes))
	clients := make([]*lockrt.Client, len(nodes))
	for i, n := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
		hooks[i] = newPipeHook()
		rdb.AddHook(hooks[i])
		c := lockrt.New(rdb)
		t.Cleanup(func() {
			c.Close()
			rdb.Close()
		})
		clients[i] = c
	}
	q := lockrt.NewQuorum(clients...)
	const lease = 4 * time.Second
	d := redDef(t, lease, true, 0)
	const locks = 300
	before := runtime.NumGoroutine()
	keys := make([]string, locks)
	leases := make([]*lockrt.RedLockLease, locks)
	for i := range locks {
		keys[i] = key(t, strconv.Itoa(i))
		le, err := q.RedLock(d, keys[i]).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = le
	}
	// The acquisitions' own goroutines (a node answering after the
	// majority) end soon; what stays is O(1), not one per held lock.
	eventually(t, 10*time.Second, func() bool { return runtime.NumGoroutine()-before <= 10 },
		fmt.Sprintf("goroutines grow with the %d RedLocks held", locks))
	for i, h := range hooks {
		eventually(t, 20*time.Second, func() bool {
			_, _, renewed := h.stats(keys)
			return renewed == locks
		}, fmt.Sprintf("node %d: not every lock was renewed", i))
		pipes, largest, _ := h.stats(keys)
		t.Logf("node %d: %d locks renewed in %d pipelines, the largest of %d commands", i, locks, pipes, largest)
		if largest > lockrt.MaxPipeline {
			t.Fatalf("node %d: a renewal pipeline carried %d commands, want at most %d", i, largest, lockrt.MaxPipeline)
		}
	}
	// Renewed past the lease.
	time.Sleep(lease)
	for i, le := range leases {
		if err := le.Context().Err(); err != nil {
			t.Fatalf("lease %d lost: %v", i, context.Cause(le.Context()))
		}
		if holders(t, nodes, keys[i]) != 3 {
			t.Fatalf("lock %d not held on every node", i)
		}
	}
	for _, le := range leases {
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The quorum's watchdog goroutine ends when nothing is held.
	eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= before }, "goroutines left after every RedLock was unlocked")
}
