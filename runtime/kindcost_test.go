package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestUncontendedKindCommands counts, from INFO commandstats of a node
// of its own, the Redis commands of an uncontended acquire+release of
// every lock kind, each side of a read-write lock and a semaphore's one
// permit, scripts' inner commands included: each kind's fast path (see
// "Cost conventions" in templates/README.md) touches only the object's
// own keys, reads no registry and publishes nothing. The counts are per
// cycle, exact, over cycles on keys of their own (each free and never
// waited for) and on the same key again (free after its release).
func TestUncontendedKindCommands(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	nodes := []*redis.Client{node.Client()}
	ctx := context.Background()
	c := newClient(t, b)
	const lease = 30 * time.Second
	lockOf := func(kind lockrt.LockKind) *lockrt.LockDef {
		d := def(t, kind, lease, true, time.Minute)
		d.Name = t.Name() + kind.String()
		preloadLock(t, b, d)
		return d
	}
	reentrant, simple, fenced, fair, rw := lockOf(lockrt.Reentrant), lockOf(lockrt.Simple), lockOf(lockrt.Fenced), lockOf(lockrt.Fair), lockOf(lockrt.ReadWrite)
	sd := semDef(t, 3, lease, true, time.Minute)
	if err := c.Preload(ctx, sd.Scripts.Acquire, sd.Scripts.Release); err != nil {
		t.Fatal(err)
	}
	lockCycle := func(l func(k string) *lockrt.Lock) func(k string) error {
		return func(k string) error {
			le, err := l(k).Lock(ctx)
			if err != nil {
				return err
			}
			return le.Unlock(ctx)
		}
	}
	cases := []struct {
		name  string
		cycle func(k string) error
		want  map[string]int64 // per cycle
	}{
		{"reentrant", lockCycle(func(k string) *lockrt.Lock { return c.Lock(reentrant, k) }),
			map[string]int64{"evalsha": 2, "set": 1, "get": 1, "del": 1}},
		{"simple", lockCycle(func(k string) *lockrt.Lock { return c.Lock(simple, k) }),
			map[string]int64{"evalsha": 2, "set": 1, "get": 1, "del": 1}},
		{"fenced", lockCycle(func(k string) *lockrt.Lock { return c.Lock(fenced, k) }),
			map[string]int64{"evalsha": 2, "get": 2, "incr": 1, "set": 1, "del": 1}},
		{"fair", lockCycle(func(k string) *lockrt.Lock { return c.Lock(fair, k) }),
			map[string]int64{"evalsha": 2, "exists": 1, "hset": 1, "pexpire": 1, "hmget": 1, "del": 1}},
		{"read-write writer", lockCycle(func(k string) *lockrt.Lock { return c.RWLock(rw, k).Write() }),
			map[string]int64{"evalsha": 2, "exists": 1, "hset": 1, "pexpire": 1, "hmget": 1, "del": 1}},
		{"read-write reader", lockCycle(func(k string) *lockrt.Lock { return c.RWLock(rw, k).Read() }),
			map[string]int64{"evalsha": 2, "exists": 1, "hset": 1, "pexpire": 1, "hmget": 1, "del": 1}},
		{"semaphore", func(k string) error {
			p, err := c.Semaphore(sd, k).Acquire(ctx, 1)
			if err != nil {
				return err
			}
			return p.Release(ctx)
		}, map[string]int64{"evalsha": 2, "exists": 1, "hset": 1, "pexpire": 1, "hmget": 1, "del": 1}},
	}
	const cycles = 20
	for _, tc := range cases {
		resetStats(t, nodes)
		for i := range cycles {
			// Keys of their own, then the first one again.
			k := key(t, tc.name, string(rune('a'+i%(cycles/2))))
			if err := tc.cycle(k); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		var sum int64
		for cmd, n := range tc.want {
			sum += n
			if got := commandCalls(t, nodes, cmd); got != n*cycles {
				t.Errorf("%s: %d %s calls in %d cycles, want %d per cycle", tc.name, got, cmd, cycles, n)
			}
		}
		if all := allCalls(t, nodes); all != sum*cycles {
			t.Errorf("%s: %.2f commands per cycle, want %d", tc.name, float64(all)/cycles, sum)
		}
	}
}

// TestRefusedAttemptCommands counts, from INFO commandstats of a node of
// its own, the Redis commands of a TryLock that finds a reentrant or
// simple lock held and does not wait: the script, its SET NX, which on
// Redis 7 answers the value that refused it (GET), and the holder's PTTL;
// no GET of its own. A registering attempt saves the same read.
func TestRefusedAttemptCommands(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	nodes := []*redis.Client{node.Client()}
	ctx := context.Background()
	holder, other := newClient(t, b), newClient(t, b)
	for _, kind := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Simple} {
		d := def(t, kind, 30*time.Second, true, time.Minute)
		d.Name = t.Name() + kind.String()
		preloadLock(t, b, d)
		k := key(t, kind.String())
		le, err := holder.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		resetStats(t, nodes)
		const tries = 10
		for range tries {
			if _, err := other.Lock(d, k).TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
				t.Fatalf("%v: TryLock on a held lock: %v, want ErrNotObtained", kind, err)
			}
		}
		want := map[string]int64{"evalsha": 1, "set": 1, "pttl": 1}
		var sum int64
		for cmd, n := range want {
			sum += n
			if got := commandCalls(t, nodes, cmd); got != n*tries {
				t.Errorf("%v: %d %s calls in %d refused attempts, want %d each", kind, got, cmd, tries, n)
			}
		}
		if all := allCalls(t, nodes); all != sum*tries {
			t.Errorf("%v: %.2f commands per refused attempt, want %d", kind, float64(all)/tries, sum)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHandOffCommands counts, from INFO commandstats of a node of its
// own, what a reentrant lock's release that hands the lock on reads of
// the registry: one ZRANGEBYSCORE of the two earliest deadlines, which
// says that nobody is dead (no purge) and whether another waiter stays
// behind the one handed the lock, so no EXISTS. The marker it writes
// says so: " w" when a second waiter waits, none for the last one.
func TestHandOffCommands(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	rdb := node.Client()
	nodes := []*redis.Client{rdb}
	ctx := context.Background()
	holder, w1, w2 := newClient(t, b), newClient(t, b), newClient(t, b)
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	k := key(t)
	le, err := holder.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got1 := inBackground(t, func() (*lockrt.Lease, error) { return w1.Lock(d, k).Lock(ctx) })
	waitRegistered(t, rdb, k, 1)
	got2 := inBackground(t, func() (*lockrt.Lease, error) { return w2.Lock(d, k).Lock(ctx) })
	waitRegistered(t, rdb, k, 2)
	handOff := func(le *lockrt.Lease, got <-chan *lockrt.Lease, more bool) *lockrt.Lease {
		t.Helper()
		resetStats(t, nodes)
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-got
		if next == nil {
			t.Fatal("the waiter was not handed the lock")
		}
		if n := commandCalls(t, nodes, "exists"); n != 0 {
			t.Errorf("%d EXISTS in a hand-off, want 0", n)
		}
		if n := commandCalls(t, nodes, "zrangebyscore"); n != 1 {
			t.Errorf("%d ZRANGEBYSCORE in a hand-off, want 1", n)
		}
		v := rdb.Get(ctx, k).Val()
		if marked := strings.HasSuffix(v, " w"); marked != more {
			t.Errorf("lock value %q after the hand-off: waiters marked %v, want %v", v, marked, more)
		}
		return next
	}
	le = handOff(le, got1, true)
	le = handOff(le, got2, false)
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRegistrationCommands counts, from INFO commandstats of a node of
// its own, what a waiter's registration costs for the registry keys'
// lifetime: the first waiter's makes the keys and sets both TTLs (two
// PEXPIREs, to twice the registration TTL); a second waiter's finds the
// keys living longer than their TTL and only reads it (a PTTL), where it
// set both TTLs before (and its attempt again once subscribed, before a
// read of the lock stood for that attempt, set them again).
func TestRegistrationCommands(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	rdb := node.Client()
	nodes := []*redis.Client{rdb}
	ctx := context.Background()
	holder, w1, w2 := newClient(t, b), newClient(t, b), newClient(t, b)
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	k := key(t)
	le, err := holder.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resetStats(t, nodes)
	got1 := inBackground(t, func() (*lockrt.Lease, error) { return w1.Lock(d, k).Lock(ctx) })
	waitWaiting(t, w1, k, 1, 1)
	if n := commandCalls(t, nodes, "pexpire"); n != 2 {
		t.Errorf("%d PEXPIREs for the first registration, want 2 (the new keys' TTLs)", n)
	}
	for _, x := range []string{keys.Sub(k, "queue"), keys.Sub(k, "waiters")} {
		if left := rdb.PTTL(ctx, x).Val(); left <= lockrt.LiveRegistryTTL {
			t.Errorf("%s lives %v, want more than LiveRegistryTTL (%v)", x, left, lockrt.LiveRegistryTTL)
		}
	}
	resetStats(t, nodes)
	got2 := inBackground(t, func() (*lockrt.Lease, error) { return w2.Lock(d, k).Lock(ctx) })
	waitWaiting(t, w2, k, 2, 1)
	if n := commandCalls(t, nodes, "pexpire"); n != 0 {
		t.Errorf("%d PEXPIREs for a second registration, want 0", n)
	}
	for _, got := range []<-chan *lockrt.Lease{got1, got2} {
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if le = <-got; le == nil {
			t.Fatal("the waiter was not handed the lock")
		}
	}
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSemaphoreLeaveCommands counts, from INFO commandstats of a node of
// its own, what a semaphore waiter that gives up costs. With nothing
// free, its leave is one script that takes its entry out (HMGET, ZREM,
// LREM), and reads neither the clock nor the registry's deadlines: it
// used to make the hand-off's purge too (TIME, ZRANGEBYSCORE), and a ZREM
// of a hold it never had, though nobody behind it could proceed. With a
// permit free, a leaver at the head of the queue still hands it to the
// waiter behind, which it blocked.
func TestSemaphoreLeaveCommands(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	rdb := node.Client()
	nodes := []*redis.Client{rdb}
	ctx := context.Background()
	d := semDef(t, 2, 30*time.Second, true, time.Minute)
	d.WaiterTTL = time.Minute // no refresh within the test
	k := key(t)
	preloadSem(t, b, d)
	// wait starts an Acquire of n permits on c, and returns its cancel and
	// its error (nil once it got them and gave them back).
	wait := func(c *lockrt.Client, n int) (context.CancelFunc, <-chan error) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			p, err := c.Semaphore(d, k).Acquire(wctx, n)
			if err == nil {
				err = p.Release(ctx)
			}
			done <- err
		}()
		return cancel, done
	}
	p, err := newClient(t, b).Semaphore(d, k).Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	h := newLookHook(d.Scripts.Acquire.SHA1, false)
	cancel, done := wait(hookedClient(t, b, h), 1)
	// Registered by its first attempt, it reads the permits held once
	// subscribed, and sleeps.
	h.waitLook(t, "the waiter never looked at the semaphore after subscribing")
	leaveCounted(t, nodes, k, cancel, done, map[string]int64{"evalsha": 1, "hmget": 1, "zrem": 1, "lrem": 1, "time": 0, "zrangebyscore": 0}, 4)

	// One permit free: a waiter for both blocks one for one behind it
	// (a newcomer does not pass a waiter the free permits do not
	// satisfy) until it leaves.
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err = newClient(t, b).Semaphore(d, k).Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancelBoth, both := wait(newClient(t, b), 2)
	waitQueued(t, rdb, k, 1)
	_, one := wait(newClient(t, b), 1)
	waitQueued(t, rdb, k, 2)
	cancelBoth()
	if err := <-both; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter for both permits: %v, want context.Canceled", err)
	}
	if err := <-one; err != nil {
		t.Fatalf("the waiter behind the leaver: %v, want the free permit", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// leaveCounted cancels the wait of a waiter of k that is asleep already
// (cancel, and done, its error), waits until it left k's queue, and
// checks what the node ran meanwhile: each command of want as many
// times, and total commands in all.
func leaveCounted(t *testing.T, nodes []*redis.Client, k string, cancel context.CancelFunc, done <-chan error, want map[string]int64, total int64) {
	t.Helper()
	resetStats(t, nodes)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter: %v, want context.Canceled", err)
	}
	waitQueued(t, nodes[0], k, 0)
	for cmd, n := range want {
		if got := commandCalls(t, nodes, cmd); got != n {
			t.Errorf("%d %s in a leave, want %d", got, strings.ToUpper(cmd), n)
		}
	}
	if got := allCalls(t, nodes) - commandCalls(t, nodes, "llen"); got != total { // (LLEN: waitQueued's)
		t.Errorf("%d commands in a leave, want %d", got, total)
	}
}

// TestFairLeaveCommands counts, from INFO commandstats of a node of its
// own, what a fair lock's waiter that gives up costs: one script that
// takes its entry out (ZREM, LREM), 3 commands with the EVALSHA. A
// waiter still registered holds nothing (whatever hands it the lock
// takes it out of the registry), so the leave no longer reads the lock's
// hash first (an HMGET: 4 commands before).
func TestFairLeaveCommands(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	nodes := []*redis.Client{node.Client()}
	ctx := context.Background()
	d := def(t, lockrt.Fair, 30*time.Second, true, time.Minute)
	d.WaiterTTL = time.Minute // no refresh within the test
	k := key(t)
	preloadLock(t, b, d)
	le, err := newClient(t, b).Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := newLookHook(d.Scripts.Acquire.SHA1, false)
	w := hookedClient(t, b, h)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := w.Lock(d, k).Lock(wctx)
		done <- err
	}()
	h.waitLook(t, "the waiter never looked at the lock after subscribing")
	leaveCounted(t, nodes, k, cancel, done, map[string]int64{"evalsha": 1, "zrem": 1, "lrem": 1, "hmget": 0}, 3)
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
