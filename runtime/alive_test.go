package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
	"github.com/redis/go-redis/v9"
)

// countedClient returns a client on b whose commands are counted.
func countedClient(t *testing.T, b backend) (*lockrt.Client, *redistest.Counter) {
	h := redistest.NewCounter()
	return hookedClient(t, b, h), h
}

// holdLock takes the lock k of d (a read-write lock's write side) on c
// and returns the lease's Unlock.
func holdLock(c *lockrt.Client, d *lockrt.LockDef, k string) (func(context.Context) error, error) {
	l := c.Lock(d, k)
	if d.Kind == lockrt.ReadWrite {
		l = c.RWLock(d, k).Write()
	}
	le, err := l.Lock(context.Background())
	if err != nil {
		return nil, err
	}
	return le.Unlock, nil
}

// holdPermit takes one permit of the semaphore k of d on c and returns
// the permit's Release.
func holdPermit(c *lockrt.Client, d *lockrt.SemaphoreDef, k string) (func(context.Context) error, error) {
	p, err := c.Semaphore(d, k).Acquire(context.Background(), 1)
	if err != nil {
		return nil, err
	}
	return p.Release, nil
}

// getsWithin waits for the waiter's hold on got, at most bound after
// since (when what happened), and gives it up.
func getsWithin(t *testing.T, got <-chan func(context.Context) error, since time.Time, bound time.Duration, what string) {
	t.Helper()
	select {
	case release := <-got:
		t.Logf("the waiter got it %v after %s", time.Since(since).Round(time.Millisecond), what)
		if err := release(context.Background()); err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Until(since.Add(bound))):
		t.Fatalf("the waiter did not get it within %v after %s", bound, what)
	}
}

// waitTrusted waits until n of c's groups of waiters are trusted: their
// first refresh named the clients to watch, and a look found them alive.
func waitTrusted(t *testing.T, c *lockrt.Client, n int) {
	t.Helper()
	eventually(t, 2*time.Minute, func() bool { return lockrt.TrustedGroups(c) == n },
		fmt.Sprintf("%d groups of waiters trusted, want %d", lockrt.TrustedGroups(c), n))
}

// TestWatchedWaitCostsPerClient: a client waiting on 20 objects held by
// another client, once its groups of waiters are trusted (their refresh
// named the holder's client, whose heartbeat is there), sends no script
// at all over a window longer than a refresh period (LiveRegistryTTL/3,
// when each group refreshed once before): one heartbeat and one MGET per
// BeatEvery, whatever the number of objects. The holder's releases then
// hand every object to its waiter. For reentrant locks, read-write locks
// (writers) and semaphores of one permit, on a single node and on a
// cluster (sharded pub/sub; the heartbeats share one slot).
func TestWatchedWaitCostsPerClient(t *testing.T) {
	t.Parallel()
	type take func(c *lockrt.Client, k string) (release func(context.Context) error, err error)
	kinds := []struct {
		name string
		take func(t *testing.T) take
	}{
		{"reentrant", func(t *testing.T) take {
			d := def(t, lockrt.Reentrant, 30*time.Second, true, 3*time.Minute)
			return func(c *lockrt.Client, k string) (func(context.Context) error, error) {
				le, err := c.Lock(d, k).Lock(context.Background())
				if err != nil {
					return nil, err
				}
				return le.Unlock, nil
			}
		}},
		{"rw-write", func(t *testing.T) take {
			d := def(t, lockrt.ReadWrite, 30*time.Second, true, 3*time.Minute)
			return func(c *lockrt.Client, k string) (func(context.Context) error, error) {
				le, err := c.RWLock(d, k).Write().Lock(context.Background())
				if err != nil {
					return nil, err
				}
				return le.Unlock, nil
			}
		}},
		{"semaphore", func(t *testing.T) take {
			d := processSemDef(1)
			d.Wait = 3 * time.Minute
			return func(c *lockrt.Client, k string) (func(context.Context) error, error) {
				p, err := c.Semaphore(d, k).Acquire(context.Background(), 1)
				if err != nil {
					return nil, err
				}
				return p.Release, nil
			}
		}},
	}
	for _, kind := range kinds {
		for _, b := range backends() {
			t.Run(kind.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				testWatchedWaitCostsPerClient(t, b, kind.take(t))
			})
		}
	}
}

func testWatchedWaitCostsPerClient(t *testing.T, b backend, take func(c *lockrt.Client, k string) (func(context.Context) error, error)) {
	ctx := context.Background()
	const objects = 20
	holder := newClient(t, b)
	waiter, counted := countedClient(t, b)
	admin := b.new()
	t.Cleanup(func() { admin.Close() })
	held := make([]func(context.Context) error, objects)
	got := make([]<-chan func(context.Context) error, objects)
	for i := range objects {
		k := key(t, fmt.Sprint(i))
		release, err := take(holder, k)
		if err != nil {
			t.Fatal(err)
		}
		held[i] = release
		got[i] = inBackground(t, func() (func(context.Context) error, error) { return take(waiter, k) })
		waitRegistered(t, admin, k, 1)
	}
	waitTrusted(t, waiter, objects)
	before := counted.Snapshot()
	window := lockrt.LiveRegistryTTL/3 + 2*time.Second
	// The window the cost is counted over: it must outlast the timers it
	// is about (an untrusted group's refresh, LiveRegistryTTL/3, and
	// several BeatEvery ticks), so no state can end it sooner.
	time.Sleep(window)
	after := counted.Snapshot()
	beats := int64(window/lockrt.BeatEvery) + 1
	for name, n := range after {
		n -= before[name]
		switch {
		case n == 0:
		case name == "set" || name == "mget" || name == "ping": // (ping: the hub's health check)
			if n > beats {
				t.Errorf("%d %s in %v, want at most %d (one per BeatEvery)", n, name, window, beats)
			}
		default:
			t.Errorf("%d %s in %v, want none while the waits are trusted", n, name, window)
		}
	}
	for i, release := range held {
		if err := release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case rel := <-got[i]:
			if err := rel(ctx); err != nil {
				t.Fatal(err)
			}
		case <-time.After(failAfter):
			t.Fatalf("object %d: the waiter did not get it after the release", i)
		}
	}
}

// TestWatchedWaitHolderGone: a trusted waiter whose holder's client goes
// away without unlocking (closed: it renews nothing and writes no
// heartbeat, as a process killed) gets the lock once the lease runs out,
// within the heartbeat's lapse (the holder's heartbeat TTL + BeatEvery)
// after that, not at its group's next trusted refresh a minute later
// (renewed: a fair lock, a read-write lock's write side, a semaphore).
// Behind a lease that is not renewed (fixed: 20s, longer than a refresh
// period), a trusted waiter looks at the hold's end only, and gets the
// lock then. On a single node and on a cluster.
func TestWatchedWaitHolderGone(t *testing.T) {
	t.Parallel()
	type take func(c *lockrt.Client) (func(context.Context) error, error)
	lockOf := func(t *testing.T, kind lockrt.LockKind, lease time.Duration, renew bool) take {
		d, k := def(t, kind, lease, renew, 3*time.Minute), key(t)
		return func(c *lockrt.Client) (func(context.Context) error, error) { return holdLock(c, d, k) }
	}
	cases := []struct {
		name  string
		lease time.Duration
		renew bool
		take  func(t *testing.T, lease time.Duration, renew bool) take
	}{
		{"fair/renewed", 6 * time.Second, true, func(t *testing.T, lease time.Duration, renew bool) take {
			return lockOf(t, lockrt.Fair, lease, renew)
		}},
		{"rw-write/renewed", 6 * time.Second, true, func(t *testing.T, lease time.Duration, renew bool) take {
			return lockOf(t, lockrt.ReadWrite, lease, renew)
		}},
		{"semaphore/renewed", 6 * time.Second, true, func(t *testing.T, lease time.Duration, renew bool) take {
			d, k := processSemDef(1), key(t)
			d.Lease, d.Renew, d.Wait = lease, renew, 3*time.Minute
			return func(c *lockrt.Client) (func(context.Context) error, error) { return holdPermit(c, d, k) }
		}},
		{"fair/fixed", 20 * time.Second, false, func(t *testing.T, lease time.Duration, renew bool) take {
			return lockOf(t, lockrt.Fair, lease, renew)
		}},
	}
	for _, tc := range cases {
		for _, b := range backends() {
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				testWatchedWaitHolderGone(t, b, tc.lease, tc.renew, tc.take(t, tc.lease, tc.renew))
			})
		}
	}
}

func testWatchedWaitHolderGone(t *testing.T, b backend, lease time.Duration, renew bool, take func(c *lockrt.Client) (func(context.Context) error, error)) {
	holder := newClient(t, b)
	waiter := newClient(t, b)
	admin := b.new()
	t.Cleanup(func() { admin.Close() })
	taken := time.Now()
	if _, err := take(holder); err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, func() (func(context.Context) error, error) { return take(waiter) })
	waitRegistered(t, admin, key(t), 1)
	waitTrusted(t, waiter, 1)
	gone := time.Now()
	holder.Close()
	bound := lease + 8*time.Second + lockrt.BeatEvery + 10*time.Second
	if !renew {
		bound = time.Until(taken.Add(lease + 5*time.Second))
	}
	getsWithin(t, got, gone, bound, "its holder went")
	t.Logf("(%v after the hold was taken)", time.Since(taken).Round(time.Millisecond))
}

// TestWatchedWaitStoppedAhead: a waiter process queued first is frozen
// (SIGSTOP) while a trusted waiter of this process waits behind it; the
// holder's release hands the lock to the frozen one (its connection is
// open: it counts as listening), and the waiter behind it, which watched
// it, finds its heartbeat lapsed, refreshes, and gets the lock once the
// hand-off's lease runs out.
func TestWatchedWaitStoppedAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	holder := newClient(t, backends()[0])
	waiter := newClient(t, backends()[0])
	d := processDef(lockrt.Reentrant)
	k := key(t)
	held, err := holder.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	child, _, _ := startWaiter(t, "reentrant", k)
	got := inBackground(t, func() (*lockrt.Lease, error) { return waiter.Lock(d, k).Lock(ctx) })
	waitRegistered(t, single.Client(), k, 2)
	waitTrusted(t, waiter, 1)
	stopChild(t, child)
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	bound := lockrt.HandoffLease + 8*time.Second + lockrt.BeatEvery + 10*time.Second
	select {
	case le := <-got:
		t.Logf("the waiter got the lock %v after the release", time.Since(released).Round(time.Millisecond))
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		t.Fatalf("the waiter behind a stopped one did not get the lock within %v of the release", bound)
	}
}

// stopChild freezes a child process (SIGSTOP).
func stopChild(t *testing.T, c *exec.Cmd) {
	t.Helper()
	if err := c.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// TestHolderBeatsInFullPipelines: a client whose watchdog renews its holds
// in full pipelines still writes its heartbeat (alone, after a full one),
// so that waiters watching it can trust it, and no pipeline carries more
// than MaxPipeline commands.
// The client takes MaxPipeline locks at once, which the watchdog renews
// together, and never waits: its renewals alone can carry its heartbeat.
func TestHolderBeatsInFullPipelines(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, time.Minute)
	node := redistest.Single(t)
	rdb := node.Client()
	defer rdb.Close()
	h := newPipeHook()
	rdb.AddHook(h)
	c := lockrt.New(rdb)
	defer c.Close()
	// Renewed every 3 s, up to 0.75 s early: locks taken within that of
	// each other are renewed in one batch.
	d := def(t, lockrt.Reentrant, 9*time.Second, true, 0)
	keys, leases := lockMany(ctx, t, c, d, lockrt.MaxPipeline)
	admin := node.Client()
	defer admin.Close()
	alive := "lockgen:{alive}:" + c.ID()
	eventually(t, 30*time.Second, func() bool { return admin.Exists(ctx, alive).Val() == 1 },
		"the holder's heartbeat was never written")
	if pipes, largest, renewed := h.stats(keys); largest > lockrt.MaxPipeline || renewed == 0 {
		t.Fatalf("%d renewal pipelines renewed %d locks, the largest of %d commands: want renewals, at most %d a pipeline", pipes, renewed, largest, lockrt.MaxPipeline)
	}
	for _, le := range leases {
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWatchedWaitDataLost: Redis loses its data (FLUSHALL, or a restart
// without persistence, on a node of the test's own) while a trusted
// waiter waits, and the holder's client writes its heartbeat again before
// the waiter looks (here by hand, as a renewal right after the restart
// would) and goes on beating (it holds another lock): the watched
// heartbeat never lapses, but the waiter finds its own gone although it
// wrote it within its TTL, refreshes every group at once, and gets the
// lock, which nobody holds any more, within a few BeatEvery, not at its
// group's next trusted refresh a minute later.
func TestWatchedWaitDataLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lose func(ctx context.Context, node *redistest.Node, admin redis.UniversalClient) error
	}{
		{"flush", func(ctx context.Context, _ *redistest.Node, admin redis.UniversalClient) error {
			return admin.FlushAll(ctx).Err()
		}},
		// Killed and started again, empty: every connection drops too,
		// and the pub/sub connection's return wakes the waiters first.
		{"restart", func(ctx context.Context, node *redistest.Node, _ redis.UniversalClient) error {
			if err := node.Kill(); err != nil {
				return err
			}
			return node.Restart()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testWatchedWaitDataLost(t, tc.lose)
		})
	}
}

func testWatchedWaitDataLost(t *testing.T, lose func(ctx context.Context, node *redistest.Node, admin redis.UniversalClient) error) {
	ctx := context.Background()
	node := redistest.Single(t)
	b := backend{"own", func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: node.Addr}) }}
	holder, waiter := newClient(t, b), newClient(t, b)
	admin := b.new()
	t.Cleanup(func() { admin.Close() })
	d, k := def(t, lockrt.Reentrant, 6*time.Second, true, 3*time.Minute), key(t)
	if _, err := holder.Lock(d, k).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, func() (func(context.Context) error, error) {
		le, err := waiter.Lock(d, k).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return le.Unlock, nil
	})
	waitRegistered(t, admin, k, 1)
	waitTrusted(t, waiter, 1)
	// And its member registered for WatchedRegistryTTL (a trusted
	// group's refresh did it): no refresh is due for a minute now.
	eventually(t, time.Minute, func() bool {
		now, err := admin.Time(ctx).Result()
		top, err2 := admin.ZRangeWithScores(ctx, keys.Sub(k, "waiters"), -1, -1).Result()
		return err == nil && err2 == nil && len(top) == 1 && top[0].Score > float64(now.Add(10*time.Minute).UnixMilli())
	}, "the waiter was never registered for WatchedRegistryTTL")
	lost := time.Now()
	if err := lose(ctx, node, admin); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, "lockgen:{alive}:"+holder.ID(), "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// The holder's client lost its lock, but goes on holding another,
	// so that its renewals keep its heartbeat there.
	if _, err := holder.Lock(d, key(t, "other")).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	getsWithin(t, got, lost, 3*lockrt.BeatEvery+10*time.Second, "the data was lost")
}

// TestWatchedWaitHoldVanished: a hold that vanishes alone (deleted by
// hand here, as an operator would; evicted under maxmemory alike) while
// its holder's client goes on holding another lock, so that its
// heartbeat stays, is found by the holder (its next renewal, or its
// release, finds nothing) and told to the trusted waiters behind it by
// its heartbeat's epoch (Client.holdGone): they look at once and the
// longest waiting gets it. Without the epoch they slept until their next
// trusted refresh (watchedEvery: a minute at least). For a reentrant
// lock, a read-write lock's writer and a semaphore of one permit; found
// by the holder's renewal and by its release.
func TestWatchedWaitHoldVanished(t *testing.T) {
	t.Parallel()
	type take func(c *lockrt.Client, lease time.Duration) (func(context.Context) error, error)
	lockOf := func(kind lockrt.LockKind) func(t *testing.T) take {
		return func(t *testing.T) take {
			k := key(t)
			return func(c *lockrt.Client, lease time.Duration) (func(context.Context) error, error) {
				return holdLock(c, def(t, kind, lease, true, 3*time.Minute), k)
			}
		}
	}
	kinds := []struct {
		name string
		take func(t *testing.T) take
	}{
		{"reentrant", lockOf(lockrt.Reentrant)},
		{"rw-write", lockOf(lockrt.ReadWrite)},
		{"semaphore", func(t *testing.T) take {
			k := key(t)
			return func(c *lockrt.Client, lease time.Duration) (func(context.Context) error, error) {
				d := processSemDef(1)
				d.Lease, d.Wait = lease, 3*time.Minute
				return holdPermit(c, d, k)
			}
		}},
	}
	for _, kind := range kinds {
		for _, by := range []string{"renewal", "release"} {
			t.Run(kind.name+"/"+by, func(t *testing.T) {
				t.Parallel()
				testWatchedWaitHoldVanished(t, kind.take(t), by == "release")
			})
		}
	}
}

func testWatchedWaitHoldVanished(t *testing.T, take func(c *lockrt.Client, lease time.Duration) (func(context.Context) error, error), byRelease bool) {
	ctx := context.Background()
	b := backends()[0]
	holder, waiter := newClient(t, b), newClient(t, b)
	admin := b.new()
	t.Cleanup(func() { admin.Close() })
	// Renewed every 2 s; released by hand, the lease is long enough that
	// no renewal comes first.
	lease := 6 * time.Second
	if byRelease {
		lease = 10 * time.Minute
	}
	k := key(t)
	release, err := take(holder, lease)
	if err != nil {
		t.Fatal(err)
	}
	// The holder's client goes on holding another lock: its renewals keep
	// its heartbeat there after the first hold vanished.
	if _, err := holder.Lock(def(t, lockrt.Reentrant, 6*time.Second, true, 0), key(t, "other")).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, func() (func(context.Context) error, error) { return take(waiter, lease) })
	waitRegistered(t, admin, k, 1)
	waitTrusted(t, waiter, 1)
	// Every key of the object but its waiter registry.
	all, err := admin.Keys(ctx, k+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var hold []string
	for _, x := range all {
		if x != keys.Sub(k, "queue") && x != keys.Sub(k, "waiters") {
			hold = append(hold, x)
		}
	}
	if len(hold) == 0 {
		t.Fatalf("no key of %s holds it: %v", k, all)
	}
	vanished := time.Now()
	if err := admin.Del(ctx, hold...).Err(); err != nil {
		t.Fatal(err)
	}
	bound := 2*time.Second + lockrt.BeatEvery + 10*time.Second // a renewal period, a look, slack
	if byRelease {
		if err := release(ctx); err == nil {
			t.Fatal("the release of a hold deleted by hand succeeded")
		}
		bound = lockrt.BeatEvery + 10*time.Second
	}
	getsWithin(t, got, vanished, bound, "the hold vanished")
}

// refreshGate is a hook that counts a client's registry refreshes in
// flight and holds the first one until release is closed.
type refreshGate struct {
	sha      string
	started  chan struct{} // one send per refresh sent
	release  chan struct{}
	inFlight atomic.Int32
	most     atomic.Int32
	first    atomic.Bool
}

func (h *refreshGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *refreshGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) < 2 || args[0] != "evalsha" || args[1] != h.sha {
			return next(ctx, cmd)
		}
		n := h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		if n > h.most.Load() {
			h.most.Store(n)
		}
		h.started <- struct{}{}
		if h.first.CompareAndSwap(false, true) {
			<-h.release
		}
		return next(ctx, cmd)
	}
}
func (h *refreshGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGroupRefreshesDoNotOverlap: a group of waiters whose refresh is
// out when its client learns that Redis lost its data (or that a client
// it watched lapsed) sends no second refresh beside the first: the
// urgent one follows when the first is back. Two at once raced on the
// group's state (the race detector found it in CI).
func TestGroupRefreshesDoNotOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := backends()[0]
	holder := newClient(t, b)
	gate := &refreshGate{sha: script(t, "registry_refresh").SHA1, started: make(chan struct{}, 16), release: make(chan struct{})}
	waiter := hookedClient(t, b, gate)
	admin := b.new()
	t.Cleanup(func() { admin.Close() })
	d, k := def(t, lockrt.Reentrant, 6*time.Second, true, 3*time.Minute), key(t)
	release, err := holdLock(holder, d, k)
	if err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, func() (func(context.Context) error, error) { return holdLock(waiter, d, k) })
	waitRegistered(t, admin, k, 1)
	lockrt.LoseData(waiter)
	select {
	case <-gate.started: // the first, held in the hook
	case <-time.After(failAfter):
		t.Fatal("no refresh after the client learnt its data was lost")
	}
	lockrt.LoseData(waiter)
	// A window for a second refresh to start beside the first (the old
	// code's did at once): none may.
	select {
	case <-gate.started:
		t.Fatal("a second refresh of the group started while the first was out")
	case <-time.After(500 * time.Millisecond):
	}
	close(gate.release)
	select {
	case <-gate.started: // the urgent one, after the first came back
	case <-time.After(failAfter):
		t.Fatal("the refresh asked for while one was out never came")
	}
	if n := gate.most.Load(); n != 1 {
		t.Errorf("%d refreshes of one group at once, want 1", n)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if err := r(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(failAfter):
		t.Fatal("the waiter did not get the lock after the release")
	}
}

// TestRegistryKeysOutliveTrustedWaiter: a trusted waiter is registered
// for WatchedRegistryTTL; a newcomer that registers behind it for
// LiveRegistryTTL and then gives up must not cut the registry keys'
// lifetime to its own. Before, every registration set both keys' TTL to
// its own: LiveRegistryTTL later the trusted waiter's entry was gone,
// and a release then handed the lock to nobody, the waiter getting it
// only at its next trusted refresh (a minute at least). Then the
// trusted waiter gets the lock at the holder's release.
func TestRegistryKeysOutliveTrustedWaiter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := backends()[0]
	holder, waiter, newcomer := newClient(t, b), newClient(t, b), newClient(t, b)
	admin := b.new()
	t.Cleanup(func() { admin.Close() })
	d, k := def(t, lockrt.Reentrant, 6*time.Second, true, 3*time.Minute), key(t)
	release, err := holdLock(holder, d, k)
	if err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, func() (func(context.Context) error, error) { return holdLock(waiter, d, k) })
	waitRegistered(t, admin, k, 1)
	waitTrusted(t, waiter, 1)
	waiters := keys.Sub(k, "waiters")
	eventually(t, time.Minute, func() bool {
		now, err := admin.Time(ctx).Result()
		top, err2 := admin.ZRangeWithScores(ctx, waiters, -1, -1).Result()
		return err == nil && err2 == nil && len(top) == 1 && top[0].Score > float64(now.Add(10*time.Minute).UnixMilli())
	}, "the waiter was never registered for WatchedRegistryTTL")
	short := *d
	short.Wait = 300 * time.Millisecond
	if _, err := newcomer.Lock(&short, k).Lock(ctx); !errors.Is(err, lockrt.ErrNotObtained) {
		t.Fatalf("the newcomer's Lock: %v, want ErrNotObtained", err)
	}
	for _, key := range []string{waiters, keys.Sub(k, "queue")} {
		if left := admin.PTTL(ctx, key).Val(); left < time.Hour {
			t.Errorf("%s lives %v after a newcomer left, want as long as the trusted waiter's entry (hours)", key, left)
		}
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	getsWithin(t, got, time.Now(), failAfter, "the release")
}
