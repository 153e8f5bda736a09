package runtime_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// The one home of the tests' waits on observable state. A test that
// needs another goroutine, client or process to have got somewhere (a
// waiter queued and subscribed, a channel joined, a count reached) waits
// for that state here, never for a while: the wait ends as soon as the
// state is there, and its deadline (failAfter) only bounds a failure, so
// a loaded machine makes a test slower, never wrong. What may still
// sleep is listed in CONTRIBUTING.md ("Writing tests").

// failAfter bounds every wait on state: far longer than anything takes
// on a loaded machine, so that only a bug reaches it.
const failAfter = 30 * time.Second

// poll is how often a wait on state looks again.
const poll = redistest.Poll

// volume scales a volume test's work (operations, items): full with
// LOCKGEN_SOAK set (`make soak`), short with -short, and a fifth of full
// (at least short) otherwise. What a volume test asserts (no overlap,
// every item once) does not depend on its volume; the soak only runs it
// longer, and the race detector makes every operation cost.
func volume(full, short int) int {
	switch {
	case os.Getenv("LOCKGEN_SOAK") != "":
		return full
	case testing.Short():
		return short
	}
	return max(full/5, short)
}

// eventually fails t unless cond holds within d (failAfter when d is
// shorter: a deadline bounds a failure, it is not an assertion on time).
func eventually(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	d = max(d, failAfter)
	if !within(d, cond) {
		t.Fatalf("%s (after %v)", msg, d)
	}
}

// within reports whether cond holds within d, asking every poll.
func within(d time.Duration, cond func() bool) bool { return redistest.Within(d, cond) }

// queueLen returns the length of k's waiter queue (key:queue, see
// "Waiter registry" in docs/design.md).
func queueLen(t testing.TB, rdb redis.UniversalClient, k string) int64 {
	t.Helper()
	n, err := rdb.LLen(context.Background(), keys.Sub(k, "queue")).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitQueued waits until k's waiter queue holds exactly n waiters.
func waitQueued(t testing.TB, rdb redis.UniversalClient, k string, n int64) {
	t.Helper()
	eventually(t, failAfter, func() bool { return queueLen(t, rdb, k) == n },
		fmt.Sprintf("%s: the waiter queue's length is not %d", k, n))
}

// waitRegistered waits until k's waiter queue holds at least n waiters.
func waitRegistered(t testing.TB, rdb redis.UniversalClient, k string, n int64) {
	t.Helper()
	eventually(t, failAfter, func() bool { return queueLen(t, rdb, k) >= n },
		fmt.Sprintf("%s: fewer than %d waiters registered", k, n))
}

// waitQueuedBesides waits until k's waiter queue holds a member that is
// not prefix's (an owner, or a client's ID and ':'): another waiter
// queued, whether or not the entry of a waiter that stopped refreshing
// has expired meanwhile (a second on a loaded machine).
func waitQueuedBesides(t testing.TB, rdb redis.UniversalClient, k, prefix string) {
	t.Helper()
	eventually(t, failAfter, func() bool {
		members, err := rdb.LRange(context.Background(), keys.Sub(k, "queue"), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			if !strings.HasPrefix(m, prefix) {
				return true
			}
		}
		return false
	}, k+": no other waiter queued")
}

// subscribers returns how many connections subscribe channel, with
// classic or sharded pub/sub, on the node or nodes behind rdb.
func subscribers(t testing.TB, rdb redis.UniversalClient, channel string) int64 {
	t.Helper()
	ctx := context.Background()
	count := func(ctx context.Context, c *redis.Client) (int64, error) {
		classic, err := c.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			return 0, err
		}
		sharded, err := c.PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			return 0, err
		}
		return classic[channel] + sharded[channel], nil
	}
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		var n atomic.Int64
		err := r.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			m, err := count(ctx, c)
			n.Add(m)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n.Load()
	case *redis.Client:
		n, err := count(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Fatalf("subscribers: a %T", rdb)
	return 0
}

// waitSubscribed waits until channel has a subscriber on rdb's nodes.
func waitSubscribed(t testing.TB, rdb redis.UniversalClient, channel string) {
	t.Helper()
	eventually(t, failAfter, func() bool { return subscribers(t, rdb, channel) > 0 },
		"nobody subscribed to "+channel)
}

// waitWaiting waits until c waits on k: n members (at least) in k's
// waiter queue, c's wake-up channel for k subscribed on the server, and
// at least joined of c's waits joined it in c's hub. From then on a
// release (a change of permits) reaches those waiters by message: they
// no longer need their fallback timer. (Latches have no registry: see
// waitAwaiting.)
func waitWaiting(t testing.TB, c *lockrt.Client, k string, n int64, joined int) {
	t.Helper()
	channel := lockrt.WakeChannel(c, k)
	eventually(t, failAfter, func() bool {
		return queueLen(t, c.Redis(), k) >= n && subscribers(t, c.Redis(), channel) > 0 && lockrt.Joined(c, channel) >= joined
	}, fmt.Sprintf("%s: %d waiters queued, %s subscribed and %d waits joined: not reached", k, n, channel, joined))
}

// waitAwaiting waits until every one of cs awaits latch k: its channel
// (key:ch, one for every awaiter) subscribed by each on the server, and
// an Await of each joined it.
func waitAwaiting(t testing.TB, k string, cs ...*lockrt.Client) {
	t.Helper()
	channel := keys.Sub(k, "ch")
	eventually(t, failAfter, func() bool {
		if subscribers(t, cs[0].Redis(), channel) < int64(len(cs)) {
			return false
		}
		for _, c := range cs {
			if lockrt.Joined(c, channel) == 0 {
				return false
			}
		}
		return true
	}, fmt.Sprintf("not all of %d clients await %s", len(cs), k))
}

// connName is the connection name of t's namedClient: the test's name
// (of this run of it: runName), which no other test shares.
func connName(t testing.TB) string { return runName(t) }

// namedClient returns a runtime client over a new connection to b whose
// connections all carry connName(t) (CLIENT SETNAME), closed when the
// test ends: waitBlocked finds them.
func namedClient(t testing.TB, b backend) *lockrt.Client {
	name := connName(t)
	rdb := b.new()
	// No connection is made before the first command: naming them in the
	// options now names every one.
	switch r := rdb.(type) {
	case *redis.Client:
		r.Options().ClientName = name
	case *redis.ClusterClient:
		r.Options().ClientName = name
	default:
		t.Fatalf("namedClient: a %T", rdb)
	}
	c := lockrt.New(rdb)
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c
}

// waitBlocked waits until a connection of t's namedClient is blocked in
// a command (BLMPOP, BLMOVE, …) on one of rdb's nodes.
// waitTakers waits until n consumers wait for the items of the queue at
// key (its takers zset, where a waiting Take registers).
func waitTakers(t testing.TB, rdb redis.UniversalClient, key string, n int64) {
	t.Helper()
	eventually(t, failAfter, func() bool {
		got, err := rdb.ZCard(context.Background(), key+":takers").Result()
		return err == nil && got == n
	}, fmt.Sprintf("%d consumers of %s did not wait", n, key))
}

func waitBlocked(t testing.TB, rdb redis.UniversalClient) {
	t.Helper()
	name := connName(t)
	blocked := func(ctx context.Context, c *redis.Client) (bool, error) {
		list, err := c.ClientList(ctx).Result()
		if err != nil {
			return false, err
		}
		for line := range strings.Lines(list) {
			named, isBlocked := false, false
			for _, f := range strings.Fields(line) {
				named = named || f == "name="+name
				flags, ok := strings.CutPrefix(f, "flags=")
				isBlocked = isBlocked || ok && strings.Contains(flags, "b")
			}
			if named && isBlocked {
				return true, nil
			}
		}
		return false, nil
	}
	eventually(t, failAfter, func() bool {
		ctx := context.Background()
		switch r := rdb.(type) {
		case *redis.ClusterClient:
			var found atomic.Bool
			err := r.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
				ok, err := blocked(ctx, c)
				if ok {
					found.Store(true)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return found.Load()
		case *redis.Client:
			ok, err := blocked(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		t.Fatalf("waitBlocked: a %T", rdb)
		return false
	}, "no connection named "+name+" blocked")
}

// waitRedLockWaiting waits until a RedLock's waiter waits on every one
// of nodes (independent nodes of the test's own, classic pub/sub): queued
// in k's waiter queue and a wake-up channel of k's namespace subscribed
// on each.
func waitRedLockWaiting(t testing.TB, nodes []*redistest.Node, k string) {
	t.Helper()
	ctx := context.Background()
	var state []string // per node, at the last look: "queued/channels"
	ok := within(failAfter, func() bool {
		state = state[:0]
		all := true
		for _, n := range nodes {
			rdb := n.Client()
			chans, err := rdb.PubSubChannels(ctx, lockrt.ClassicWakePrefix(k)+":*").Result()
			if err != nil {
				t.Fatal(err)
			}
			q := queueLen(t, rdb, k)
			state = append(state, fmt.Sprintf("%d/%d", q, len(chans)))
			all = all && q >= 1 && len(chans) > 0
		}
		return all
	})
	if !ok {
		t.Fatalf("%s: the RedLock's waiter is not queued and subscribed on every node (after %v; queued/channels per node: %v)", k, failAfter, state)
	}
}

// countScripts returns a counter of the scripts c runs from now on.
func countScripts(c *lockrt.Client) *evalCounter {
	h := &evalCounter{}
	c.Redis().AddHook(h)
	return h
}

// waitSettled waits until each of the new clients counted by cs (one
// waiter each, see countScripts) has run the two scripts that start a
// wait: the attempt that registered it, and the one more a client's
// first wait makes once its channel is subscribed (waitFor in wait.go).
// From then on a waiter with a long WaiterTTL runs nothing until woken.
func waitSettled(t testing.TB, cs []*evalCounter) {
	t.Helper()
	eventually(t, failAfter, func() bool {
		for _, c := range cs {
			if c.n.Load() < 2 {
				return false
			}
		}
		return true
	}, "the waiters did not all run their first two scripts")
}

// TestIdleClientSendsNoPings: a client whose waits ended, its wake-up
// channel unsubscribed (PUBSUB NUMSUB 0 after the hub's linger, with at
// most a health ping per hub.HealthEvery meanwhile), sends Redis nothing
// while it stays idle: its pub/sub connection, with no channel to lose,
// is not pinged (a subscribed one is, after hub.HealthEvery of silence).
// Counted by INFO commandstats over two of the hub's silences and a
// second: the window is the hub's timer, which would have pinged twice
// in it.
func TestIdleClientSendsNoPings(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	rdb := node.Client()
	ctx := context.Background()
	holder, waiter := newClient(t, b), newClient(t, b)
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	k := key(t)
	if err := handedOver(t, rdb, holder, waiter, d, k).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	resetStats(t, []*redis.Client{rdb})
	channel := lockrt.WakeChannel(waiter, k)
	if !redistest.Within(lockrt.HubLinger+5*time.Second, func() bool { return rdb.PubSubNumSub(ctx, channel).Val()[channel] == 0 }) {
		t.Fatalf("the waiter's channel is still subscribed %v after its wait", lockrt.HubLinger+5*time.Second)
	}
	if n, most := commandCalls(t, []*redis.Client{rdb}, "ping"), int64(lockrt.HubLinger/lockrt.HubHealthEvery); n > most {
		t.Errorf("%d PINGs while the channel lingered, want at most %d", n, most)
	}
	resetStats(t, []*redis.Client{rdb})
	window := 2*lockrt.HubHealthEvery + time.Second
	time.Sleep(window) // the hub's ping timer runs twice in it
	if n := commandCalls(t, []*redis.Client{rdb}, "ping"); n != 0 {
		t.Errorf("%d PINGs from idle clients in %v, want 0", n, window)
	}
}

// handedOver has holder take d's lock k, waiter wait for it (registered),
// and holder release it: it returns the waiter's lease, handed over.
func handedOver(t *testing.T, rdb *redis.Client, holder, waiter *lockrt.Client, d *lockrt.LockDef, k string) *lockrt.Lease {
	t.Helper()
	ctx := context.Background()
	le, err := holder.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, func() (*lockrt.Lease, error) { return waiter.Lock(d, k).Lock(ctx) })
	waitRegistered(t, rdb, k, 1)
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if le = <-got; le == nil {
		t.Fatal("the waiter did not get the lock")
	}
	return le
}

// TestLingeringChannelSkipsSecondAttempt: a client whose wait ended keeps
// its wake-up channel subscribed (the hub's linger, 30 s), so its next
// wait in the namespace, on another lock 2 s later (longer than the
// hub's linger of one second before), costs no SUBSCRIBE and no second
// attempt once subscribed: the holder's Lock, the waiter's one attempt
// and the holder's Unlock (two scripts: the fast path's, then the
// hand-off), 4 scripts. With the channel gone it is a SUBSCRIBE and a
// GET more (TestFirstWaitReadsInsteadOfTrying; 5 scripts and a SUBSCRIBE
// before the GET stood for the attempt after subscribing).
func TestLingeringChannelSkipsSecondAttempt(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	rdb := node.Client()
	nodes := []*redis.Client{rdb}
	ctx := context.Background()
	holder, waiter := newClient(t, b), newClient(t, b)
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	if err := handedOver(t, rdb, holder, waiter, d, key(t, "1")).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the window the channel must outlast: longer than the old linger
	resetStats(t, nodes)
	le := handedOver(t, rdb, holder, waiter, d, key(t, "2"))
	if n := commandCalls(t, nodes, "subscribe"); n != 0 {
		t.Errorf("%d SUBSCRIBE for the second wait, want 0: the channel lingers", n)
	}
	if n := commandCalls(t, nodes, "evalsha"); n != 4 {
		t.Errorf("%d scripts for a Lock, a wait and an Unlock, want 4 (no second attempt)", n)
	}
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// lookHook watches a client's looks at one lock while it waits: it
// counts its attempts (EVALSHAs of the acquire script, sha), holds the
// first one (after Redis ran it) until gate is closed when gate is set,
// and signals looked at every later look: an attempt, a GET, or a
// pipeline with a ZSCORE (a wait's read after a first subscription).
type lookHook struct {
	sha      string
	gate     chan struct{} // nil: the first attempt is not held
	ran      chan struct{} // closed once the first attempt ran
	looked   chan struct{}
	attempts atomic.Int32
}

func newLookHook(sha string, gated bool) *lookHook {
	h := &lookHook{sha: sha, ran: make(chan struct{}), looked: make(chan struct{}, 1)}
	if gated {
		h.gate = make(chan struct{})
	}
	return h
}

func (h *lookHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lookHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		switch attempt := len(args) > 1 && args[0] == "evalsha" && args[1] == h.sha; {
		case attempt && h.attempts.Add(1) == 1:
			close(h.ran)
			if h.gate != nil {
				<-h.gate
			}
		case attempt || cmd.Name() == "get":
			h.look()
		}
		return err
	}
}
func (h *lookHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if c.Name() == "zscore" {
				h.look()
			}
		}
		return err
	}
}

// waitLook waits for the next look h signals, and fails the test with
// msg when none comes within failAfter.
func (h *lookHook) waitLook(t testing.TB, msg string) {
	t.Helper()
	select {
	case <-h.looked:
	case <-time.After(failAfter):
		t.Fatal(msg)
	}
}

func (h *lookHook) look() {
	select {
	case h.looked <- struct{}{}:
	default:
	}
}

// TestFirstWaitReadsInsteadOfTrying: a client's first wait on a channel
// it had not subscribed (a new client here; on a cluster, every object
// has its own) used to try again once the subscription was confirmed,
// since a release may have published before it: a script. It now reads
// the object's holds and its own registration instead (plain reads and
// a ZSCORE, in one round trip) and sleeps at once when a hold of
// another's is in its way and it is still registered: one attempt
// before the release, where it was two. The release then hands it the
// lock or the permit. For a reentrant lock (a string hold: GET), a fair
// lock (a hash: HKEYS), either side of a read-write lock behind a writer
// (HGET of its writer) and a semaphore (HMGET of the permits held and
// the cached capacity), on a single node and a 3-primary cluster.
func TestFirstWaitReadsInsteadOfTrying(t *testing.T) {
	t.Parallel()
	deps := countedDeployments(t)
	locked := func(l func(c *lockrt.Client, k string) *lockrt.Lock) func(c *lockrt.Client, k string) (func(context.Context) error, error) {
		return func(c *lockrt.Client, k string) (func(context.Context) error, error) {
			le, err := l(c, k).Lock(context.Background())
			if err != nil {
				return nil, err
			}
			return le.Unlock, nil
		}
	}
	lockOf := func(kind lockrt.LockKind) (string, func(c *lockrt.Client, k string) *lockrt.Lock) {
		d := def(t, kind, 30*time.Second, true, time.Minute)
		return d.Scripts.Acquire.SHA1, func(c *lockrt.Client, k string) *lockrt.Lock { return c.Lock(d, k) }
	}
	rw := def(t, lockrt.ReadWrite, 30*time.Second, true, time.Minute)
	sem := semDef(t, 1, 30*time.Second, true, time.Minute)
	type take = func(c *lockrt.Client, k string) (func(context.Context) error, error)
	cases := []struct {
		name        string
		sha         string
		hold, waits take
	}{
		{name: "reentrant"}, {name: "fair"},
		{name: "write", sha: rw.Scripts.Acquire.SHA1,
			hold: locked(func(c *lockrt.Client, k string) *lockrt.Lock { return c.RWLock(rw, k).Write() })},
		{name: "read", sha: rw.Scripts.Acquire.SHA1,
			hold:  locked(func(c *lockrt.Client, k string) *lockrt.Lock { return c.RWLock(rw, k).Write() }),
			waits: locked(func(c *lockrt.Client, k string) *lockrt.Lock { return c.RWLock(rw, k).Read() })},
		{name: "semaphore", sha: sem.Scripts.Acquire.SHA1, hold: func(c *lockrt.Client, k string) (func(context.Context) error, error) {
			p, err := c.Semaphore(sem, k).Acquire(context.Background(), 1)
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		}},
	}
	for i, kind := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Fair} {
		sha, l := lockOf(kind)
		cases[i].sha, cases[i].hold = sha, locked(l)
	}
	for _, tc := range cases {
		if tc.waits == nil {
			tc.waits = tc.hold
		}
		for _, dep := range deps {
			t.Run(tc.name+"/"+dep.b.name, func(t *testing.T) { testFirstWaitReads(t, dep, tc.sha, tc.hold, tc.waits) })
		}
	}
}

// testFirstWaitReads is TestFirstWaitReadsInsteadOfTrying on dep: hold
// takes the object for a holder, waits for the waiter, whose attempts are
// the acquire script sha's.
func testFirstWaitReads(t *testing.T, dep counted, sha string, hold, waits func(c *lockrt.Client, k string) (func(context.Context) error, error)) {
	ctx := context.Background()
	h := newLookHook(sha, false)
	waiter := hookedClient(t, dep.b, h)
	k := key(t)
	release, err := hold(newClient(t, dep.b), k)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		release, err := waits(waiter, k)
		if err == nil {
			err = release(ctx)
		}
		got <- err
	}()
	h.waitLook(t, "the first wait never looked at the object again after subscribing")
	if n := h.attempts.Load(); n != 1 {
		t.Errorf("%d attempts before the release, want 1 (none after subscribing)", n)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}

// TestPassedOverBeforeSubscribing: a waiter whose first attempt
// registered it, and whose channel was not subscribed yet when the
// release came, is passed over (the release saw nobody listening) and
// the lock handed to the waiter behind it. Its check after subscribing
// finds another owner holding the lock but itself no longer registered,
// so it tries again and queues; the next release hands it the lock at
// once. A check of the holder alone let it sleep unregistered until its
// client's refresh, LiveRegistryTTL/3 later (a herd of 64 clients on a
// cluster left most of them unserved in its first round). For a
// reentrant and a fair lock.
func TestPassedOverBeforeSubscribing(t *testing.T) {
	t.Parallel()
	for _, kind := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Fair} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			testPassedOverBeforeSubscribing(t, kind)
		})
	}
}

func testPassedOverBeforeSubscribing(t *testing.T, kind lockrt.LockKind) {
	ctx := context.Background()
	b := backends()[0]
	d := def(t, kind, 30*time.Second, true, time.Minute)
	k := key(t)
	h := newLookHook(d.Scripts.Acquire.SHA1, true)
	w := hookedClient(t, b, h)
	holder, x := newClient(t, b), newClient(t, b)
	le, err := holder.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotW := inBackground(t, func() (*lockrt.Lease, error) { return w.Lock(d, k).Lock(ctx) })
	select {
	case <-h.ran: // w is registered, its wait not begun
	case <-time.After(failAfter):
		t.Fatal("w's first attempt did not run")
	}
	gotX := inBackground(t, func() (*lockrt.Lease, error) { return x.Lock(d, k).Lock(ctx) })
	waitWaiting(t, x, k, 2, 1)
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var lx *lockrt.Lease
	select {
	case lx = <-gotX: // w passed over: nobody listened on its channel
	case <-time.After(failAfter):
		t.Fatal("x was not handed the lock")
	}
	close(h.gate)
	h.waitLook(t, "w never looked at the lock again after subscribing")
	if err := lx.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	const bound = 3 * time.Second // well under w's client's refresh (LiveRegistryTTL/3)
	select {
	case lw := <-gotW:
		if lw == nil {
			t.Fatal("w did not get the lock")
		}
		if err := lw.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		t.Fatalf("w did not get the lock within %v of x's release: it slept unregistered", bound)
	}
}

// allDone waits for n results on done, failing the test with the first
// error, or with msg when one takes longer than failAfter.
func allDone(t *testing.T, done <-chan error, n int, msg string) {
	t.Helper()
	for range n {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(failAfter):
			t.Fatal(msg)
		}
	}
}
