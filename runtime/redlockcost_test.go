//go:build costs

package runtime_test

// The runtime's cost tests that need its test-only exports (RedCounts)
// and depend on timing (tolerances per acquisition under contention):
// built with -tags costs, run by `make costs` in their own CI step, not
// by the correctness suite (issue 29). The others live in scripts/bench.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestRedLockHerdCost counts what RedLock's waiting costs with a waiter
// registry on each node (see "RedLock" in docs/design.md): with W
// waiting processes (each its own runtime and go-redis clients) a release
// wakes one waiter per node, not W: the scripts per acquisition, summed
// over the nodes' INFO commandstats, stay flat in W (logged with the
// PUBLISH and all commands). Without the registry (every release
// publishing on every node, every waiter trying every node) they were
// 8.5, 14.4 and 21.3 at W = 2, 4, 8. The runtime counts the waits'
// attempts (RedCounts): a woken waiter seldom loses, as a release
// reserves its node for the waiter it woke (logged: attempts, splits,
// grace waits per acquisition).
func TestRedLockHerdCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nodes := redistest.Independent(t, 3)
	admins := clientsOf(nodes)
	d := redDef(t, 5*time.Second, true, time.Minute)
	k := key(t)
	// No refreshes during the runs (on a loaded machine a wait may pass
	// WaiterTTL/3): count the wake-up protocol only.
	d.WaiterTTL = time.Minute
	perAcq, wasted, grace := map[int]float64{}, map[int]float64{}, map[int]float64{}
	for _, w := range []int{2, 4, 8, 32} {
		ls := make([]*lockrt.RedLock, w)
		var rc lockrt.RedCounts
		for i := range ls {
			q := quorum(t, nodes)
			q.CountInto(&rc)
			ls[i] = q.RedLock(d, k)
		}
		total := int64(10 * w)
		counts := make([]int, w)
		resetStats(t, admins)
		start := time.Now()
		var (
			wg     sync.WaitGroup
			taken  atomic.Int64
			inside atomic.Int32
		)
		for i, l := range ls {
			wg.Go(func() {
				for taken.Load() < total {
					le, err := l.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					taken.Add(1)
					counts[i]++
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					le.Unlock(ctx)
				}
			})
		}
		wg.Wait()
		acq := float64(taken.Load())
		perAcq[w] = float64(commandCalls(t, admins, "evalsha")) / acq
		t.Logf("%d RedLock clients on %d nodes: %.1f scripts, %.1f PUBLISH, %.1f commands per acquisition (%.0f in %v); per client %v",
			w, len(nodes), perAcq[w], float64(commandCalls(t, admins, "publish"))/acq, float64(allCalls(t, admins))/acq, acq, time.Since(start).Round(time.Millisecond), counts)
		attempts := rc.First.Load() + rc.Woken.Load() + rc.Refresh.Load()
		t.Logf("%d clients, per acquisition: %.2f attempts (%.2f first, %.2f woken, %.2f refresh), %.2f split, %.2f wasted wake-ups, %.2f grace waits (%v each on average)",
			w, float64(attempts)/acq, float64(rc.First.Load())/acq, float64(rc.Woken.Load())/acq, float64(rc.Refresh.Load())/acq,
			float64(rc.Split.Load())/acq, float64(rc.WastedWake.Load())/acq, float64(rc.Grace.Load())/acq,
			time.Duration(rc.GraceNanos.Load()/max(1, rc.Grace.Load())).Round(time.Microsecond))
		wasted[w] = float64(rc.WastedWake.Load()) / acq
		grace[w] = float64(rc.Grace.Load()) / acq
		for i, c := range counts {
			if c == 0 {
				t.Errorf("%d waiting clients: client %d never got the lock (%v)", w, i, counts)
			}
		}
	}
	// Per acquisition on each node: the winner's attempt and the release,
	// about 2, and the loser's attempt when it was refused (the
	// releaser's next Lock, refused by the node's reservation for the
	// woken waiter) or split the nodes (the undoing, the winner leaving
	// the registry where it was refused).
	for w, got := range perAcq {
		if limit := 5.0 * float64(len(nodes)); got > limit {
			t.Errorf("%d waiting clients: %.1f scripts per acquisition, want at most %.0f (5 per node)", w, got, limit)
		}
	}
	if perAcq[32] > 1.5*perAcq[4] {
		t.Errorf("scripts per acquisition grow with the waiters: %.1f with 32, %.1f with 4", perAcq[32], perAcq[4])
	}
	// A release reserves its node for the waiter it woke, so the woken
	// waiter, not the releaser's next Lock, takes the nodes: without the
	// reservation 0.8 and 1.1 woken waiters per acquisition took no
	// majority at 8 and 32 waiters (0.1-0.2 with it).
	for _, w := range []int{8, 32} {
		if got := wasted[w]; got > 0.5 {
			t.Errorf("%d waiting clients: %.2f wasted wake-ups per acquisition, want at most 0.5 (each node reserved for the waiter it woke)", w, got)
		}
	}
	// Every node wakes the same waiter, the one whose wait began first
	// (the ticket its members lead with): when nodes woke the head of
	// their own queue, two waiters registered at about the same time were
	// queued in different orders on different nodes, each woken on some,
	// and one waited out the grace: 0.21-0.27 grace waits per acquisition
	// at 32 waiters (0.01 with the ticket).
	if got := grace[32]; got > 0.1 {
		t.Errorf("32 waiting clients: %.2f grace waits per acquisition, want at most 0.1 (every node wakes the smallest ticket)", got)
	}
}

// TestSelfRefreshingWaitCost: the waiters that refresh their own entries
// (a RedLock's on each node; an atomic multi-lock's at the lock that
// blocks it until its client's group of waiters took that over:
// TestMultiLockWaitersShareRefresh) keep them for LiveRegistryTTL where a release passes over a
// waiter whose client went away (every node here is a single primary),
// so that a waiter held up by a long hold sends one attempt per node
// every 10 s, not one every RegistryTTL/3 (333 ms: 18 commands a second
// per waiter and node before). Counted on nodes of the test's own over a
// window of 3 s after the waiter queued: at most one script per node
// (about 9 before).
func TestSelfRefreshingWaitCost(t *testing.T) {
	t.Parallel()
	// The window counted: a tenth of the waiters' registration TTL now
	// (LiveRegistryTTL: a refresh every third of it), nine refreshes of
	// the RegistryTTL they used before.
	const window = lockrt.LiveRegistryTTL / 10
	ctx := context.Background()
	t.Run("redlock", func(t *testing.T) {
		t.Parallel()
		nodes, admins, d, k, held := heldRedLock(t)
		got := inBackground(t, func() (*lockrt.RedLockLease, error) { return quorum(t, nodes).RedLock(d, k).Lock(ctx) })
		waitRedLockWaiting(t, nodes, k)
		resetStats(t, admins)
		time.Sleep(window) // the window counted
		scripts := commandCalls(t, admins, "evalsha")
		t.Logf("a RedLock waiter on %d nodes: %d scripts in %v", len(nodes), scripts, window)
		if scripts > int64(len(nodes)) {
			t.Errorf("%d scripts in %v, want at most one per node", scripts, window)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if le := <-got; le != nil {
			le.Unlock(ctx)
		}
	})
	t.Run("multilock", func(t *testing.T) {
		t.Parallel()
		d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
		admin, held, c, m, kb := blockedMultiLock(t, d)
		got := inBackground(t, func() (*lockrt.MultiLease, error) { return m.Lock(ctx) })
		waitWaiting(t, c, kb, 1, 1)
		resetStats(t, []*redis.Client{admin})
		time.Sleep(window) // the window counted
		scripts := commandCalls(t, []*redis.Client{admin}, "evalsha")
		t.Logf("a multi-lock waiter: %d scripts in %v", scripts, window)
		if scripts > 1 {
			t.Errorf("%d scripts in %v, want at most one", scripts, window)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if ml := <-got; ml != nil {
			ml.Unlock(ctx)
		}
	})
}

// TestRedLockMinorityFreeWaitCost: a RedLock held on a majority of its
// nodes but not on all (one node restarted empty, or the holder's call to
// it was late and another attempt came first) leaves that node free, and
// every waiter's attempt is granted there and refused on the majority: a
// minority grant, which is not two owners splitting the nodes. The
// waiter backs off from such attempts (each pause a multiple of the last)
// to its usual wait, registered on the nodes that refused it, instead of
// retrying after a pause of a few attempts' time for as long as the hold
// lasts.
func TestRedLockMinorityFreeWaitCost(t *testing.T) {
	t.Parallel()
	nodes, admins, d, k, held := heldRedLock(t)
	ctx := context.Background()
	// Node 1 forgets the hold, as an empty restart would.
	if n, err := admins[1].Del(ctx, k).Result(); err != nil || n != 1 {
		t.Fatalf("deleting %s on node 1: %d, %v", k, n, err)
	}
	got := inBackground(t, func() (*lockrt.RedLockLease, error) { return quorum(t, nodes).RedLock(d, k).Lock(ctx) })
	waitQueued(t, admins[0], k, 1)
	waitQueued(t, admins[2], k, 1)
	resetStats(t, admins)
	const window = 3 * time.Second
	time.Sleep(window) // the window counted
	scripts := commandCalls(t, admins, "evalsha")
	t.Logf("a RedLock waiter with a free node in the minority: %d scripts on %d nodes in %v", scripts, len(nodes), window)
	// Backing off by 4x from the third split on, from a pause of a few
	// milliseconds, it reaches a second within seven attempts of four
	// scripts (three acquires and an undo): at most about 30 in the
	// window; retrying after each pause, thousands.
	if scripts > 40 {
		t.Errorf("%d scripts in %v, want at most 40: the waiter retries its minority grant without backing off", scripts, window)
	}
	// Backed off, it still wakes at the release (registered on the nodes
	// that refused it), not at its next timer.
	released := time.Now()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case le := <-got:
		t.Logf("the waiter took the lock %v after the release", time.Since(released))
		if le != nil {
			le.Unlock(ctx)
		}
	case <-time.After(lockrt.LiveRegistryTTL / 3):
		t.Fatalf("the waiter did not get the lock within %v of the release", lockrt.LiveRegistryTTL/3)
	}
}

// TestMultiLockWaitersShareRefresh: the waits of an atomic multi-lock
// are refreshed by their client, one registry_refresh per object for all
// its waiters there, as a Lock's: 10 multi-lock waits on one client
// blocked at one lock cost one script per refresh period (WaiterTTL/3:
// 200 ms here), not one per waiter (each refreshed its own entry before:
// about 100 scripts in the window). Then the holder's release lets every
// one of them through in turn.
func TestMultiLockWaitersShareRefresh(t *testing.T) {
	t.Parallel()
	const waiters, window = 10, 2 * time.Second
	ctx := context.Background()
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	d.WaiterTTL = 600 * time.Millisecond
	admin, held, c, m, kb := blockedMultiLock(t, d)
	done := make(chan error, waiters)
	for range waiters {
		go func() {
			ml, err := m.Lock(ctx)
			if err == nil {
				err = ml.Unlock(ctx)
			}
			done <- err
		}()
	}
	waitWaiting(t, c, kb, waiters, waiters)
	resetStats(t, []*redis.Client{admin})
	time.Sleep(window) // the window counted
	scripts := commandCalls(t, []*redis.Client{admin}, "evalsha")
	most := int64(float64(window)/float64(d.WaiterTTL/3)*1.25) + 1 // (a refresh comes up to a tenth early)
	t.Logf("%d multi-lock waiters on one client: %d scripts in %v", waiters, scripts, window)
	if scripts > most {
		t.Errorf("%d scripts in %v, want at most %d (one per refresh period, not per waiter)", scripts, window, most)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	allDone(t, done, waiters, "a multi-lock waiter did not get its locks after the release")
}

// blockedMultiLock starts a node of the test's own and returns its admin
// client, the lease of another client on lock B of d, and an atomic
// multi-lock over locks A and B of d on client c, blocked at B (its key
// kb) until that lease is released.
func blockedMultiLock(t *testing.T, d *lockrt.LockDef) (admin *redis.Client, held *lockrt.Lease, c *lockrt.Client, m *lockrt.MultiLock, kb string) {
	t.Helper()
	node := redistest.Single(t)
	b := backend{"own", func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: node.Addr}) }}
	ka, kb := key(t, "A"), key(t, "B")
	held, err := newClient(t, b).Lock(d, kb).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c = newClient(t, b)
	m = lockrt.NewMultiLock(c.Lock(d, ka), c.Lock(d, kb))
	if !m.Atomic() {
		t.Fatal("not an atomic multi-lock")
	}
	return node.Client(), held, c, m, kb
}

// TestRedLockWaitersShareRefresh: the waits of a RedLock are refreshed by
// their node clients, one registry_refresh per node for all the waiters
// of a client there, as a Lock's: 10 waits on one quorum behind a
// holder cost each node one script per refresh period (WaiterTTL/3: 200
// ms here), not one per waiter (each refreshed its entries on every node
// before: 90 scripts a node in the window). Then the holder's
// release lets every one of them through in turn.
func TestRedLockWaitersShareRefresh(t *testing.T) {
	t.Parallel()
	const waiters, window = 10, 2 * time.Second
	ctx := context.Background()
	nodes, admins, d, k, held := heldRedLock(t)
	d.WaiterTTL = 600 * time.Millisecond
	q := quorum(t, nodes)
	// A wait that runs out first subscribes the quorum's channels, which
	// linger: the waiters below find them subscribed, and make no
	// attempt after subscribing (which would land in the window).
	if _, err := q.RedLock(d, k).TryLock(ctx, 100*time.Millisecond); !errors.Is(err, lockrt.ErrNotObtained) {
		t.Fatalf("TryLock behind the holder: %v, want ErrNotObtained", err)
	}
	for _, a := range admins {
		waitQueued(t, a, k, 0) // (its leave)
	}
	done := make(chan error, waiters)
	for range waiters {
		go func() {
			le, err := q.RedLock(d, k).Lock(ctx)
			if err == nil {
				err = le.Unlock(ctx)
			}
			done <- err
		}()
	}
	for _, a := range admins {
		waitQueued(t, a, k, waiters)
	}
	resetStats(t, admins)
	time.Sleep(window)                                             // the window counted
	most := int64(float64(window)/float64(d.WaiterTTL/3)*1.25) + 1 // (a refresh comes up to a tenth early)
	for i, a := range admins {
		scripts := commandCalls(t, []*redis.Client{a}, "evalsha")
		t.Logf("%d RedLock waiters on one quorum: %d scripts on node %d in %v", waiters, scripts, i, window)
		if scripts > most {
			t.Errorf("node %d: %d scripts in %v, want at most %d (one per refresh period, not per waiter)", i, scripts, window, most)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	allDone(t, done, waiters, "a RedLock waiter did not get the lock after the release")
}
