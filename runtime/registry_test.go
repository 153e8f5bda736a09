package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// commandCalls sums the calls of command (lower case, e.g. "evalsha") in
// INFO commandstats over the given primaries.
func commandCalls(t testing.TB, nodes []*redis.Client, command string) int64 {
	t.Helper()
	var total int64
	for _, n := range nodes {
		info, err := n.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":calls=")
			if !ok {
				continue
			}
			v, _, _ := strings.Cut(rest, ",")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
	}
	return total
}

// allCalls sums the calls of every command in INFO commandstats over the
// given primaries, but those of the test's own bookkeeping (INFO, CONFIG,
// HELLO, CLIENT, CLUSTER, PING).
func allCalls(t testing.TB, nodes []*redis.Client) int64 {
	t.Helper()
	var total int64
	for _, n := range nodes {
		info, err := n.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
			if !ok || strings.HasPrefix(name, "info") || strings.HasPrefix(name, "config") || strings.HasPrefix(name, "hello") ||
				strings.HasPrefix(name, "client") || strings.HasPrefix(name, "cluster") || name == "ping" {
				continue
			}
			v, _, _ := strings.Cut(rest, ",")
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			total += c
		}
	}
	return total
}

// resetStats runs CONFIG RESETSTAT on every node.
func resetStats(t testing.TB, nodes []*redis.Client) {
	t.Helper()
	for _, n := range nodes {
		if err := n.ConfigResetStat(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// herd makes n runtime clients, each over a go-redis client of its own,
// loop Lock, a short hold, Unlock on the lock that lockOf returns for
// each until it was taken total times in all. It returns the acquisitions
// of each client and fails the test when two held the lock at once.
func herd(t *testing.T, newRDB func() redis.UniversalClient, lockOf func(*lockrt.Client) *lockrt.Lock, n, total int) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		taken  atomic.Int64
		inside atomic.Int32
		counts = make([]int, n)
		wg     sync.WaitGroup
		errs   = make(chan error, n)
	)
	for i := range n {
		rdb := newRDB()
		c := lockrt.New(rdb)
		defer func() {
			c.Close()
			rdb.Close()
		}()
		l := lockOf(c)
		wg.Go(func() {
			for taken.Load() < int64(total) {
				le, err := l.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					errs <- errors.New("two holders at once")
				}
				counts[i]++
				taken.Add(1)
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				if err := le.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return counts
}

// TestWakeOneAcrossClients: with N waiting clients (each its own go-redis
// and runtime client) on one reentrant lock, a release wakes one waiter,
// not N: the scripts run per acquisition stay flat in N (an acquire that
// registers, and the release that hands the lock on), counted by INFO
// commandstats; and every client gets the lock.
func TestWakeOneAcrossClients(t *testing.T) {
	t.Parallel()
	node, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	cl, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	primaries := func() []*redis.Client {
		var cs []*redis.Client
		for _, a := range cl.Addrs {
			cs = append(cs, redis.NewClient(&redis.Options{Addr: a}))
		}
		return cs
	}
	deployments := []struct {
		name  string
		nodes []*redis.Client
		new   func() redis.UniversalClient
	}{
		{"single", []*redis.Client{node.Client()}, func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: node.Addr}) }},
		{"cluster", primaries(), func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs}) }},
	}
	for _, dep := range deployments {
		for _, n := range []int{8, 32} {
			t.Run(dep.name+"/"+strconv.Itoa(n), func(t *testing.T) {
				d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
				// No refreshes during the run (on a loaded machine a wait
				// may pass WaiterTTL/3): count the hand-off protocol only.
				d.WaiterTTL = time.Minute
				k := key(t)
				total := 10 * n
				resetStats(t, dep.nodes)
				counts := herd(t, dep.new, func(c *lockrt.Client) *lockrt.Lock { return c.Lock(d, k) }, n, total)
				acquired := 0
				for i, c := range counts {
					acquired += c
					if c == 0 {
						t.Errorf("client %d never got the lock (%v)", i, counts)
					}
				}
				evalsha := commandCalls(t, dep.nodes, "evalsha") + commandCalls(t, dep.nodes, "eval")
				per := float64(evalsha) / float64(acquired)
				t.Logf("%d clients: %d acquisitions, %d scripts: %.2f per acquisition; per client %v", n, acquired, evalsha, per, counts)
				if per > 2.5 {
					t.Errorf("%.2f scripts per acquisition with %d waiting clients, want <= 2.5", per, n)
				}
			})
			t.Run(dep.name+"/fair/"+strconv.Itoa(n), func(t *testing.T) {
				d := def(t, lockrt.Fair, 30*time.Second, true, time.Minute)
				// No refreshes during the run (on a loaded machine a wait
				// may pass WaiterTTL/3): count the hand-off protocol only.
				d.WaiterTTL = time.Minute
				k := key(t)
				total := 10 * n
				resetStats(t, dep.nodes)
				counts := herd(t, dep.new, func(c *lockrt.Client) *lockrt.Lock { return c.Lock(d, k) }, n, total)
				acquired := 0
				for _, c := range counts {
					acquired += c
				}
				per := float64(allCalls(t, dep.nodes)) / float64(acquired)
				t.Logf("fair, %d clients: %d acquisitions, %.1f commands per acquisition (scripts' included); per client %v", n, acquired, per, counts)
				if per > 20 {
					t.Errorf("%.1f commands per fair acquisition with %d waiting clients, want <= 20", per, n)
				}
			})
		}
	}
}

// TestClosedWaiterDoesNotStrand: a waiter whose client is closed while it
// waits, without leaving the registry (its Redis connection is gone), may
// be handed the lock once; the waiter behind it still gets the lock, once
// the hand-off's short lease runs out.
func TestClosedWaiterDoesNotStrand(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
		k := key(t)
		holder := newClient(t, b)
		le, err := holder.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		deadRDB := b.new()
		dead := lockrt.New(deadRDB)
		deadDone := make(chan error, 1)
		go func() {
			_, err := dead.Lock(d, k).Lock(ctx)
			deadDone <- err
		}()
		waitRegistered(t, holder.Redis(), k, 1)
		// The dead client's connection goes first, so it cannot leave.
		deadRDB.Close()
		dead.Close()
		live := newClient(t, b)
		got := make(chan error, 1)
		go func() {
			le, err := live.Lock(d, k).Lock(ctx)
			if err == nil {
				err = le.Unlock(ctx)
			}
			got <- err
		}()
		waitRegistered(t, holder.Redis(), k, 2)
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the live waiter did not get the lock within 10s of the release")
		}
		<-deadDone
	})
}

// waitRegistered waits until k's waiter registry holds at least n members.
func waitRegistered(t testing.TB, rdb redis.UniversalClient, k string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := rdb.LLen(context.Background(), keys.Sub(k, "queue")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters registered, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWaiterRefreshCost: what a waiter costs Redis per second while
// another owner holds the lock, counted by INFO commandstats: one
// EVALSHA per WaiterTTL/3, which only refreshes the waiter's entry (TIME,
// ZADD XX, PTTL and two PEXPIREs: 6 commands with the EVALSHA, where a
// full attempt costs 7 or more), for every kind of lock with a registry
// and for an atomic multi-lock.
// At the default WaiterTTL (1s) that is 3 scripts and 18 commands per
// waiting second.
func TestWaiterRefreshCost(t *testing.T) {
	t.Parallel()
	const waiters, window = 4, 2 * time.Second
	for _, name := range []string{"reentrant", "simple", "fenced", "fair", "multi"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			n := redistest.Single(t)
			multi := name == "multi"
			kind := map[string]lockrt.LockKind{"reentrant": lockrt.Reentrant, "simple": lockrt.Simple, "fenced": lockrt.Fenced,
				"fair": lockrt.Fair, "multi": lockrt.Reentrant}[name]
			d := def(t, kind, 30*time.Second, true, time.Minute)
			d.WaiterTTL = 600 * time.Millisecond // a refresh every 200ms
			k := key(t)
			holder := lockrt.New(n.Client())
			defer holder.Close()
			le, err := holder.Lock(d, k).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range waiters {
				rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
				c := lockrt.New(rdb)
				defer func() {
					c.Close()
					rdb.Close()
				}()
				wg.Go(func() {
					if multi {
						// An atomic multi-lock over k and another lock:
						// k blocks it.
						m := lockrt.NewMultiLock(c.Lock(d, key(t, "other")), c.Lock(d, k))
						if !m.Atomic() {
							t.Error("the multi-lock is not atomic")
						}
						ml, err := m.Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						ml.Unlock(ctx)
						return
					}
					le, err := c.Lock(d, k).Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					le.Unlock(ctx)
				})
			}
			waitRegistered(t, n.Client(), k, waiters)
			nodes := []*redis.Client{n.Client()}
			resetStats(t, nodes)
			time.Sleep(window)
			scripts := commandCalls(t, nodes, "evalsha") + commandCalls(t, nodes, "eval")
			all := allCalls(t, nodes)
			if err := le.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			perSecond := float64(scripts) / (waiters * window.Seconds())
			perCall := float64(all) / float64(scripts)
			t.Logf("%s: %d waiters for %v: %d scripts, %d commands: %.1f refreshes per waiting second (at most %.1f), %.2f commands each",
				name, waiters, window, scripts, all, perSecond, 3/d.WaiterTTL.Seconds(), perCall)
			if scripts == 0 {
				t.Fatal("no refresh while waiting")
			}
			if perSecond > 3/d.WaiterTTL.Seconds()*1.1 {
				t.Errorf("%.1f scripts per waiting second, want at most one per WaiterTTL/3", perSecond)
			}
			// 6.5: a refresh late enough on a loaded machine that the
			// entry expired makes the full attempt (7-8) once.
			if perCall > 6.5 {
				t.Errorf("%.2f commands per refresh, want 6 (EVALSHA, TIME, ZADD, PTTL, 2 PEXPIRE)", perCall)
			}
		})
	}
}
