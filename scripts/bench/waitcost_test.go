package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestWaitingCostPerClient: what 1 000 waiters on one lock, spread over
// 64 clients (each its own go-redis client and runtime Client), cost Redis
// per second while another client holds the lock, counted by INFO
// commandstats over a window longer than a refresh period
// (LiveRegistryTTL/3): each client refreshes its waiters' registrations
// with one registry_refresh per refresh period (6 commands) however many
// of its goroutines wait, and its pub/sub connection is pinged when
// silent; issue 27's target is at most 64 commands per second in all
// (one per client). Then the holder releases and every waiter gets the
// lock in turn (none starved).
func TestWaitingCostPerClient(t *testing.T) {
	const (
		clients = 64
		waiters = 1000
	)
	window := lockrt.LiveRegistryTTL/3 + 2*time.Second
	if testing.Short() {
		t.Skip("a window of " + window.String())
	}
	ctx := context.Background()
	n := redistest.Single(t)
	k := costKey(t)
	d := costLockDef(t, lockimpl.Reentrant, 0) // the default registration
	holder := lockrt.New(n.Client())
	defer holder.Close()
	held, err := lockimpl.NewLock(holder, d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*lockrt.Client, clients)
	for i := range cs {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
		cs[i] = lockrt.New(rdb)
		defer func() {
			cs[i].Close()
			rdb.Close()
		}()
	}
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		wg.Go(func() {
			le, err := lockimpl.NewLock(cs[i%clients], d, k).Lock(ctx)
			if err == nil {
				err = le.Unlock(ctx)
			}
			errs <- err
		})
	}
	rdb := n.Client()
	waitQueued(t, rdb, k, waiters)
	// The waiters that started before their client's channel was
	// subscribed try once more after it was (see "Waiting"): the window
	// starts once no script has run for a while.
	waitQuiet(t, rdb, time.Second)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(window) // the window the cost is counted over
	stats := parseCommandStats(t, rdb.Info(ctx, "commandstats").Val())
	calls := workCalls(t, rdb)
	var all int64
	for _, c := range calls {
		all += c
	}
	pings := stats["ping"].calls
	perSecond := float64(all+pings) / window.Seconds()
	t.Logf("%d waiters over %d clients for %v: %d scripts, %d commands and %d pings: %.1f commands per second (%.2f per client, %.3f per waiter)",
		waiters, clients, window, calls["evalsha"]+calls["eval"], all, pings, perSecond, perSecond/clients, perSecond/waiters)
	if perSecond > clients {
		t.Errorf("%.1f commands per second, want at most %d (one per client)", perSecond, clients)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a waiter: %v", err)
		}
	}
}

// waitQuiet waits until rdb's node has run no script for quiet.
func waitQuiet(tb testing.TB, rdb *redis.Client, quiet time.Duration) {
	tb.Helper()
	scripts := func() int64 {
		st := parseCommandStats(tb, rdb.Info(context.Background(), "commandstats").Val())
		return st["evalsha"].calls + st["eval"].calls
	}
	last, since := scripts(), time.Now()
	for end := time.Now().Add(time.Minute); time.Since(since) < quiet; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			tb.Fatal("scripts still running after a minute")
		}
		if n := scripts(); n != last {
			last, since = n, time.Now()
		}
	}
}
