package runtime_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// slotsHook counts the CLUSTER SLOTS a cluster client's node clients send:
// one per slot-map reload.
type slotsHook struct{ n atomic.Int64 }

func (h *slotsHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slotsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) == 2 && cmd.Name() == "cluster" && args[1] == "slots" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *slotsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestClusterFailover: four processes (a go-redis cluster client and a
// runtime client each) lock and unlock locks in the slots of one primary
// of a 3-primary + 3-replica cluster, which is killed (SIGKILL). Once its
// replica is promoted, every process locks and unlocks again within a
// generous deadline (go-redis alone would keep dialling the dead node
// until its periodic reload, a minute later), and their clients reloaded
// the slot map on the connection errors.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.NewCluster(t, 3, redistest.WithReplicas(1), redistest.WithArgs("--cluster-node-timeout", "2000"))
	const procs = 4
	d := def(t, lockrt.Reentrant, 2*time.Second, true, 0)
	// Keys in primary 1's slots (5461..10922), one per process.
	probe := c.Client()
	var keys []string
	for i := 0; len(keys) < procs; i++ {
		k := key(t, strconv.Itoa(i))
		if s := probe.ClusterKeySlot(ctx, k).Val(); s >= 5461 && s <= 10922 {
			keys = append(keys, k)
		}
	}
	hooks := make([]*slotsHook, procs)
	clients := make([]*lockrt.Client, procs)
	for i := range procs {
		h := &slotsHook{}
		hooks[i] = h
		rdb := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Addrs,
			NewClient: func(o *redis.Options) *redis.Client {
				nc := redis.NewClient(o)
				nc.AddHook(h)
				return nc
			},
		})
		clients[i] = lockrt.New(rdb)
		t.Cleanup(func() {
			clients[i].Close()
			rdb.Close()
		})
	}

	var (
		mu   sync.Mutex
		last = make([]time.Time, procs) // when each process last began a cycle that succeeded
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			l := clients[i].Lock(d, keys[i])
			for {
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now()
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				le, err := l.TryLock(cctx, 0)
				if err == nil {
					time.Sleep(2 * time.Millisecond)
					err = le.Unlock(cctx)
				}
				cancel()
				if err == nil {
					mu.Lock()
					last[i] = began
					mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	succeededSince := func(at time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range last {
			if l.After(at) {
				n++
			}
		}
		return n
	}
	start := time.Now()
	eventually(t, 10*time.Second, func() bool { return succeededSince(start) == procs }, "processes do not lock before the failover")

	reloads := make([]int64, procs)
	for i, h := range hooks {
		reloads[i] = h.n.Load()
	}
	killed := time.Now()
	if _, err := c.KillPrimary(ctx, 1); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	t.Logf("replica promoted %v after the kill", promoted.Sub(killed))
	// A deadline, not a timing assertion: well under go-redis' own
	// one-minute reload.
	eventually(t, 20*time.Second, func() bool { return succeededSince(promoted) == procs }, "processes do not lock again after the promotion")
	t.Logf("every process locked again %v after the promotion", time.Since(promoted))
	for i, h := range hooks {
		if n := h.n.Load() - reloads[i]; n == 0 {
			t.Errorf("process %d did not reload the slot map", i)
		} else {
			t.Logf("process %d: %d slot-map reloads", i, n)
		}
	}
}
