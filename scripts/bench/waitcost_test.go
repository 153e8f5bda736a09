package bench

import (
	"context"
	"strconv"
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
// with one registry_refresh per refresh period (6 commands behind a
// string lock, 9 behind a compact hash hold) however many of its
// goroutines wait, and its pub/sub connection is pinged when silent;
// issue 27's target is at most 64 commands per second in all (one per
// client). The waits are watched (runtime/alive.go): the window starts
// once every client's first refresh trusted the holder and the clients
// queued ahead, and then holds heartbeats and MGETs only. Then the holder releases and every waiter gets the lock in
// turn (none starved). For the reentrant lock, the write side of a
// read-write lock and a semaphore of one permit, each on a node of its
// own, in parallel.
func TestWaitingCostPerClient(t *testing.T) {
	window := lockrt.LiveRegistryTTL/3 + 2*time.Second
	if testing.Short() {
		t.Skip("a window of " + window.String())
	}
	type acquirer func(c *lockrt.Client) (release func(context.Context) error, err error)
	kinds := []struct {
		name string
		open func(t *testing.T, k string) acquirer
	}{
		{"reentrant", func(t *testing.T, k string) acquirer {
			d := costLockDef(t, lockimpl.Reentrant, 0) // the default registration
			return func(c *lockrt.Client) (func(context.Context) error, error) {
				le, err := lockimpl.NewLock(c, d, k).Lock(context.Background())
				if err != nil {
					return nil, err
				}
				return le.Unlock, nil
			}
		}},
		{"rw-write", func(t *testing.T, k string) acquirer {
			d := costLockDef(t, lockimpl.ReadWrite, 0)
			return func(c *lockrt.Client) (func(context.Context) error, error) {
				le, err := lockimpl.NewRWLock(c, d, k).Write().Lock(context.Background())
				if err != nil {
					return nil, err
				}
				return le.Unlock, nil
			}
		}},
		{"semaphore", func(t *testing.T, k string) acquirer {
			d := costSemDef(t, 0)
			return func(c *lockrt.Client) (func(context.Context) error, error) {
				p, err := lockimpl.NewSemaphore(c, d, k).Acquire(context.Background(), 1)
				if err != nil {
					return nil, err
				}
				return p.Release, nil
			}
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			n := redistest.Single(t)
			k := costKey(t)
			waitingCost(t, n, k, kind.open(t, k), window)
		})
	}
}

// waitingCost runs TestWaitingCostPerClient's case on node n: a holder
// takes k with acquire, 1 000 waiters over 64 clients wait for it, and
// what Redis runs per second is counted over window.
func waitingCost(t *testing.T, n *redistest.Node, k string, acquire func(*lockrt.Client) (func(context.Context) error, error), window time.Duration) {
	const (
		clients = 64
		waiters = 1000
	)
	ctx := context.Background()
	holder := lockrt.New(n.Client())
	defer holder.Close()
	release, err := acquire(holder)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*lockrt.Client, clients)
	sent := redistest.NewCounter() // the waiting clients'
	for i := range cs {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
		rdb.AddHook(sent)
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
			rel, err := acquire(cs[i%clients])
			if err == nil {
				err = rel(ctx)
			}
			errs <- err
		})
	}
	rdb := n.Client()
	waitQueued(t, rdb, k, waiters)
	// The clients' groups are trusted once their first refresh named the
	// holder's client and those queued ahead, and a look found them
	// alive: from then on they send no script (runtime/alive.go).
	waitScriptsQuiet(t, sent)
	w := countWindow(t, rdb, window)
	perSecond := w.perSecond()
	t.Logf("%d waiters over %d clients for %v: %d scripts, %d commands and %d pings: %.1f commands per second (%.2f per client, %.3f per waiter)",
		waiters, clients, window, w.scripts(), w.commands, w.pings, perSecond, perSecond/clients, perSecond/waiters)
	if perSecond > clients {
		t.Errorf("%.1f commands per second, want at most %d (one per client)", perSecond, clients)
	}
	if err := release(ctx); err != nil {
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

// countedWindow is what a node ran over a window (see countWindow).
type countedWindow struct {
	window          time.Duration
	calls           map[string]int64 // per command, the test's bookkeeping left out (workCalls)
	commands, pings int64
}

// countWindow waits until rdb's node is quiet (waiters that started
// before their client's channel was subscribed try once more after it
// was, see "Waiting"), then counts what it runs over window: the window
// is the measurement's, not a synchronisation.
func countWindow(tb testing.TB, rdb *redis.Client, window time.Duration) countedWindow {
	tb.Helper()
	ctx := context.Background()
	waitQuiet(tb, rdb, time.Second)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		tb.Fatal(err)
	}
	time.Sleep(window) // the window the cost is counted over
	w := countedWindow{window: window, calls: workCalls(tb, rdb)}
	for _, c := range w.calls {
		w.commands += c
	}
	w.pings = parseCommandStats(tb, rdb.Info(ctx, "commandstats").Val())["ping"].calls
	return w
}

// scripts returns the scripts run in the window.
func (w countedWindow) scripts() int64 { return w.calls["evalsha"] + w.calls["eval"] }

// perSecond returns the commands and pings run per second of the window.
func (w countedWindow) perSecond() float64 {
	return float64(w.commands+w.pings) / w.window.Seconds()
}

// waitQuiet waits until rdb's node has run no script for quiet.
func waitQuiet(tb testing.TB, rdb *redis.Client, quiet time.Duration) {
	tb.Helper()
	last, since := int64(-1), time.Now()
	if !redistest.Within(time.Minute, func() bool {
		st := parseCommandStats(tb, rdb.Info(context.Background(), "commandstats").Val())
		if n := st["evalsha"].calls + st["eval"].calls; n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet
	}) {
		tb.Fatal("scripts still running after a minute")
	}
}

// waitScriptsQuiet waits until the clients sent counts have sent no
// script for longer than an untrusted group's refresh period: every group
// of their waiters is trusted (runtime/alive.go), or a refresh would
// have come.
func waitScriptsQuiet(tb testing.TB, sent *redistest.Counter) {
	tb.Helper()
	if !sent.ScriptsQuiet(3*time.Minute, lockrt.LiveRegistryTTL/3+lockrt.BeatEvery) {
		tb.Fatal("the waiting clients still send scripts after 3 minutes")
	}
}

// BenchmarkWaitingCostPerKey: what one waiting client (its own go-redis
// and runtime Client) costs Redis per second while it waits on K
// different locks, one waiter each, that another client holds. Issue 27
// wants at most one command per second per waiting client "on however
// many keys".
//
// renewed: the holder's leases are the default, renewed by its watchdog
// (which writes its heartbeat). Once the waiting client's groups trust
// the holder (runtime/alive.go), what it sends is counted by a go-redis
// hook: heartbeats and MGETs, a script counted as the 9 commands of a
// registry_refresh at most, and the hub's health-check PING (one per
// 10s, not seen by the hook) added.
//
// fixed: the holder's leases last 10 minutes without renewal (counted by
// INFO commandstats, which then sees only the waiting client): a trusted
// group watches nobody and looks at the hold's end only.
//
// Both windows start once every group is trusted: the waiting client has
// sent no script for longer than an untrusted group's refresh period.
//
// renewed-cluster: renewed, on a 3-primary cluster (sharded pub/sub, the
// locks over every primary, the heartbeats on one).
//
// Run it with -benchtime 1x.
func BenchmarkWaitingCostPerKey(b *testing.B) {
	window := lockrt.LiveRegistryTTL/3 + 2*time.Second
	for _, c := range []struct {
		name             string
		renewed, cluster bool
		keys             []int
	}{
		{"renewed", true, false, []int{1, 10, 100, 1000}},
		{"fixed", false, false, []int{1, 10, 100, 1000}},
		{"renewed-cluster", true, true, []int{10, 1000}},
	} {
		for _, keys := range c.keys {
			b.Run(c.name+"/"+strconv.Itoa(keys), func(b *testing.B) {
				for range b.N {
					perSecond := waitingCostPerKey(b, keys, c.renewed, c.cluster, window)
					b.ReportMetric(perSecond, "cmds/s")
					b.ReportMetric(perSecond/float64(keys), "cmds/s/key")
				}
			})
		}
	}
}

// waitingCostPerKey runs BenchmarkWaitingCostPerKey's case for keys locks
// and returns the commands per second counted over window.
func waitingCostPerKey(b *testing.B, keys int, renewed, cluster bool, window time.Duration) float64 {
	ctx := context.Background()
	d := costLockDef(b, lockimpl.Reentrant, 0)
	if !renewed {
		d.Lease, d.Renew = 10*time.Minute, false
	}
	var n *redistest.Node
	newRDB := func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: n.Addr}) }
	if cluster {
		cl, _ := startBenchCluster(b)
		newRDB = func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs}) }
	} else {
		n = redistest.Single(b)
	}
	admin := newRDB()
	defer admin.Close()
	holder := lockrt.New(admin)
	defer holder.Close()
	ks := make([]string, keys)
	for i := range ks {
		ks[i] = costKey(b, strconv.Itoa(i))
		if _, err := lockimpl.NewLock(holder, d, ks[i]).Lock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	rdb := newRDB()
	sent := redistest.NewCounter()
	rdb.AddHook(sent)
	c := lockrt.New(rdb)
	defer func() { c.Close(); rdb.Close() }()
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Go(func() {
			if _, err := lockimpl.NewLock(c, d, k).Lock(wctx); err == nil {
				b.Errorf("%s: taken while held", k)
			}
		})
	}
	for _, k := range ks {
		if !redistest.Within(30*time.Second, func() bool { return admin.LLen(ctx, k+":queue").Val() >= 1 }) {
			b.Fatalf("%s: no waiter queued", k)
		}
	}
	defer func() { cancel(); wg.Wait() }()
	// Every group trusted: no script sent for longer than an untrusted
	// group's refresh period.
	waitScriptsQuiet(b, sent)
	if !renewed {
		w := countWindow(b, n.Client(), window)
		perSecond := w.perSecond()
		b.Logf("fixed leases: one client waiting on %d locks for %v: %d scripts, %d commands and %d pings: %.2f commands per second (%.3f per lock) %v",
			keys, window, w.scripts(), w.commands, w.pings, perSecond, perSecond/float64(keys), w.calls)
		return perSecond
	}
	before := sent.Snapshot()
	// The window the cost is counted over: the timers it is about (the
	// heartbeats every BeatEvery, the trusted refreshes) run in it, so no
	// state can end it sooner.
	time.Sleep(window)
	after := sent.Snapshot()
	var scripts, commands int64
	for name, v := range after {
		v -= before[name]
		if name == "evalsha" || name == "eval" {
			scripts += v
		} else {
			commands += v
		}
	}
	pings := int64(window / (10 * time.Second)) // the hub's health check
	perSecond := float64(commands+9*scripts+pings) / window.Seconds()
	b.Logf("renewed leases: one client waiting on %d locks for %v: %d scripts, %d other commands, %d pings: %.2f commands per second (%.4f per lock)",
		keys, window, scripts, commands, pings, perSecond, perSecond/float64(keys))
	return perSecond
}
