package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
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
		taken          atomic.Int64
		inside         atomic.Int32
		overlaps, lost atomic.Int64
		counts         = make([]int, n)
		wg             sync.WaitGroup
		errs           = make(chan error, n)
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
					overlaps.Add(1)
				}
				counts[i]++
				taken.Add(1)
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				if err := le.Unlock(ctx); errors.Is(err, lockrt.ErrLockLost) {
					// Its hand-off lease (HandoffLease) ran out before
					// the new holder extended it: a stall of a second
					// on a loaded machine, which the lease reports.
					lost.Add(1)
				} else if err != nil {
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
	if lost.Load() > 0 {
		t.Logf("%d leases lost (stalled past their hand-off lease)", lost.Load())
	}
	// Two holders at once only where a lease ran out under its holder.
	if overlaps.Load() > 0 && (lost.Load() == 0 || costsChecked) {
		t.Fatalf("two holders at once %d times (%d leases lost)", overlaps.Load(), lost.Load())
	}
	if costsChecked && lost.Load() > 0 {
		t.Errorf("%d leases lost in a herd", lost.Load())
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
				if costsChecked && per > 2.5 {
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
				// (20.0 measured at 32 clients with the free lock's "s"
				// mark of issue 27's fast path: 20.5.)
				if costsChecked && per > 20.5 {
					t.Errorf("%.1f commands per fair acquisition with %d waiting clients, want <= 20.5", per, n)
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
		got := lockThenUnlock(ctx, live.Lock(d, k).Lock)
		waitQueuedBesides(t, holder.Redis(), k, dead.ID()+":")
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

// The dead and stopped waiter tests re-execute the test binary as a child
// process that waits for a lock (waiterChild): a waiter that can be
// killed (SIGKILL) or frozen (SIGSTOP) as a real process is. These
// variables configure the child.
const (
	waiterChildEnv = "LOCKGEN_WAITER_CHILD" // the kind (see take)
	waiterAddrEnv  = "LOCKGEN_WAITER_ADDR"
	waiterKeyEnv   = "LOCKGEN_WAITER_KEY"
)

// insideKey is the holder counter of lock k: every holder in the tests
// below increments it when it got the lock and decrements it before it
// unlocks, so a value above 1 is two holders at once.
func insideKey(k string) string { return keys.Sub(k, "inside") }

// take acquires what the process tests contend for, on c: lock k of
// kind (a lock kind's name), or with kind "semaphore" one permit of a
// semaphore of one at k. It returns how to give it back and whether its
// lease's context is live.
func take(ctx context.Context, c *lockrt.Client, kind, k string) (release func(context.Context) error, live func() bool, err error) {
	if kind == "semaphore" {
		p, err := c.Semaphore(processSemDef(1), k).Acquire(ctx, 1)
		if err != nil {
			return nil, nil, err
		}
		return p.Release, func() bool { return p.Context().Err() == nil }, nil
	}
	for _, lk := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Simple, lockrt.Fenced, lockrt.Fair} {
		if lk.String() == kind {
			le, err := c.Lock(processDef(lk), k).Lock(ctx)
			if err != nil {
				return nil, nil, err
			}
			return le.Unlock, func() bool { return le.Context().Err() == nil }, nil
		}
	}
	return nil, nil, fmt.Errorf("no kind %q", kind)
}

// waiterChild is the child's main: wait for the lock, then print
// "acquired <counter> <live>" (the holder counter after its increment,
// and whether the lease's context is live), hold it 50ms and unlock.
func waiterChild() int {
	ctx, k := context.Background(), os.Getenv(waiterKeyEnv)
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(waiterAddrEnv)})
	c := lockrt.New(rdb)
	defer c.Close()
	release, live, err := take(ctx, c, os.Getenv(waiterChildEnv), k)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, err := rdb.Incr(ctx, insideKey(k)).Result()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("acquired %d %t\n", n, live())
	time.Sleep(50 * time.Millisecond)
	if err := rdb.Decr(ctx, insideKey(k)).Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := release(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// lineWriter sends each line written to it to lines.
type lineWriter struct {
	buf   []byte
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- string(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// startWaiter starts a child process waiting for kind's lock k (see
// take) on the standalone node, waits until it is registered as k's only
// waiter, and returns it, its owner (of its registry member) and the
// lines it prints. The child is continued and killed when the test ends.
func startWaiter(t *testing.T, kind, k string) (*exec.Cmd, string, <-chan string) {
	t.Helper()
	lines := make(chan string, 16)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), waiterChildEnv+"="+kind, waiterAddrEnv+"="+single.Addr, waiterKeyEnv+"="+k)
	cmd.Stdout, cmd.Stderr = &lineWriter{lines: lines}, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	rdb := single.Client()
	waitRegistered(t, rdb, k, 1)
	member, err := rdb.LIndex(context.Background(), keys.Sub(k, "queue"), 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	owner := strings.Fields(member)[0]
	// And subscribed to its client's wake-up channel, which it does after
	// the attempt that registered it: a child stopped between the two
	// would be passed over by the release (no receiver), not handed the
	// lock.
	channel := lockrt.ClassicWakePrefix(k) + ":" + owner[:strings.LastIndexByte(owner, ':')]
	eventually(t, failAfter, func() bool { return subscribers(t, rdb, channel) > 0 },
		fmt.Sprintf("the waiter process is not subscribed to %s", channel))
	return cmd, owner, lines
}

// heldBy reports whether k of kind (see take) is held by owner in Redis.
func heldBy(t testing.TB, kind, k, owner string) bool {
	t.Helper()
	rdb, ctx := single.Client(), context.Background()
	switch kind {
	case "fair":
		ok, err := rdb.HExists(ctx, k, owner).Result()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	case "semaphore": // the holders' deadlines, or the compact single hold's owner
		_, err := rdb.ZScore(ctx, k, owner).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if err == nil {
			return true
		}
		single, err := rdb.HGet(ctx, keys.Sub(k, "counts"), "s").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		return single == owner
	}
	v, err := rdb.Get(ctx, k).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	f := strings.Fields(v)
	return len(f) > 0 && f[0] == owner
}

// liveHolder is a live waiter in the tests below, on a client of its
// own: it takes lock k, counts itself in insideKey(k) (reporting two
// holders at once), and holds the lock until release is closed.
type liveHolder struct {
	got     chan time.Time // when it got the lock
	release chan struct{}
	done    chan error
}

func holdLive(t *testing.T, kind, k string) *liveHolder {
	h := &liveHolder{got: make(chan time.Time, 1), release: make(chan struct{}), done: make(chan error, 1)}
	c := newClient(t, backends()[0])
	rdb := single.Client()
	go func() {
		ctx := context.Background()
		release, _, err := take(ctx, c, kind, k)
		if err != nil {
			h.done <- err
			return
		}
		h.got <- time.Now()
		if n, err := rdb.Incr(ctx, insideKey(k)).Result(); err != nil || n != 1 {
			h.done <- fmt.Errorf("the live waiter got the lock with %d holders counted (%v)", n, err)
			return
		}
		<-h.release
		if err := rdb.Decr(ctx, insideKey(k)).Err(); err != nil {
			h.done <- err
			return
		}
		h.done <- release(ctx)
	}()
	return h
}

// handRound is one round of the tests below: a holder, a child waiting
// behind it that signal kills or freezes right after it registered, a
// live waiter (holdLive) behind that, and the holder's release.
type handRound struct {
	child    *exec.Cmd
	lines    <-chan string // the child's
	live     *liveHolder
	released time.Time
	handed   bool // the release handed the lock to the child
}

func handToChild(t *testing.T, kind string, holder *lockrt.Client, signal func(*exec.Cmd) error, try int) handRound {
	t.Helper()
	ctx := context.Background()
	k := key(t, strconv.Itoa(try), strconv.FormatInt(time.Now().UnixNano(), 36)) // -count > 1 runs on keys of their own
	release, _, err := take(ctx, holder, kind, k)
	if err != nil {
		t.Fatal(err)
	}
	child, owner, lines := startWaiter(t, kind, k)
	if err := signal(child); err != nil {
		t.Fatal(err)
	}
	r := handRound{child: child, lines: lines, live: holdLive(t, kind, k)}
	// The live waiter is queued (the stopped one's entry may have
	// expired meanwhile on a loaded machine: the callers try again).
	waitQueuedBesides(t, single.Client(), k, owner)
	r.released = time.Now()
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	r.handed = heldBy(t, kind, k, owner)
	return r
}

// gotLock waits until the live waiter has the lock, and returns when.
func (h *liveHolder) gotLock(t *testing.T) time.Time {
	t.Helper()
	select {
	case at := <-h.got:
		return at
	case err := <-h.done:
		t.Fatal(err)
	case <-time.After(liveWaiterBound):
		t.Fatalf("the live waiter did not get the lock within %v of the release", liveWaiterBound)
	}
	return time.Time{}
}

// liveWaiterBound is how long gotLock waits: behind a waiter stopped with
// its connection open, the live one gets the lock once the hand-off's
// lease ran out and its client's next refresh of its registration found
// the lock free, up to HandoffLease and LiveRegistryTTL/3 after the
// release (the documented cost of a stopped waiter), and a loaded
// machine's delay on top (10 s, the bound before, failed once in CI at
// 10.05 s).
const liveWaiterBound = lockrt.HandoffLease + lockrt.LiveRegistryTTL/3 + 5*time.Second

// unlock makes the live waiter give the lock up.
func (h *liveHolder) unlock(t *testing.T) {
	t.Helper()
	close(h.release)
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
}

// TestDeadWaiterPassedOver: a waiter process killed (SIGKILL) right after
// it registered is passed over by the next release, although its entry's
// deadline has not passed: its client's subscription went with its
// connection, so the release's wake-up reaches nobody (see notify in
// templates/registry.luainc). The release hands the lock to the next live
// waiter, on a client of its own, at once: the dead one is never handed
// it, and the live one has it well within a hand-off lease of the release
// (a hand-off to the dead one would keep it HandoffLease), for every lock
// kind with hand-off and a semaphore of one permit.
func TestDeadWaiterPassedOver(t *testing.T) {
	t.Parallel()
	kill := func(c *exec.Cmd) error {
		err := c.Process.Kill()
		_ = c.Wait()
		return err
	}
	for _, kind := range []string{"reentrant", "simple", "fenced", "fair", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			holder := newClient(t, backends()[0])
			r := handToChild(t, kind, holder, kill, 1)
			at := r.live.gotLock(t)
			r.live.unlock(t)
			if r.handed {
				t.Fatal("the release handed the lock to the dead waiter")
			}
			waited := at.Sub(r.released)
			t.Logf("the live waiter got the lock %v after the release", waited)
			if waited >= lockrt.HandoffLease {
				t.Errorf("the live waiter got the lock %v after the release, want < HandoffLease (%v)", waited, lockrt.HandoffLease)
			}
		})
	}
}

// TestStoppedWaiter: a waiter process frozen (SIGSTOP) right after it
// registered is handed the lock by the next release; the live waiter
// behind it gets the lock once the hand-off's lease runs out, and the
// frozen one, continued (SIGCONT) while the live one holds the lock, does
// not take it on the late message: it confirms, finds another holder and
// waits again, then gets the lock after the live one's release, with a
// live lease. The holder counter never sees two holders. Also for a
// semaphore of one permit.
func TestStoppedWaiter(t *testing.T) {
	t.Parallel()
	stop := func(c *exec.Cmd) error { return c.Process.Signal(syscall.SIGSTOP) }
	for _, kind := range []string{"reentrant", "fair", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			holder := newClient(t, backends()[0])
			for try := 1; ; try++ {
				r := handToChild(t, kind, holder, stop, try)
				r.live.gotLock(t)
				if err := r.child.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				select {
				case line := <-r.lines:
					t.Fatalf("the continued waiter printed %q while the live waiter holds the lock", line)
				case <-time.After(time.Second):
				}
				r.live.unlock(t)
				select {
				case line := <-r.lines:
					if line != "acquired 1 true" {
						t.Fatalf("the continued waiter printed %q, want %q", line, "acquired 1 true")
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the continued waiter did not get the lock within 10s of the live one's release")
				}
				if err := r.child.Wait(); err != nil {
					t.Fatalf("the continued waiter: %v", err)
				}
				if r.handed {
					return
				}
				if try == 3 {
					t.Fatal("3 releases did not hand the lock to the stopped waiter")
				}
				t.Logf("try %d: the stopped waiter's entry expired before the release", try)
			}
		})
	}
}

// TestCarriedOwnerStaleMessage: an owner carried from an earlier lease
// (a context derived from its Context, without its cancellation) waits
// again; a hand-off message naming it that Redis did not back (as a
// message of its earlier wait, kept by the hub for an owner not joined,
// would be) does not give it the lock: it confirms with an attempt, finds
// the holder and keeps waiting, and gets the lock on the holder's release.
func TestCarriedOwnerStaleMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, kind := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Fair} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			d := processDef(kind)
			k := key(t, strconv.FormatInt(time.Now().UnixNano(), 36))
			waiter, holder := newClient(t, backends()[0]), newClient(t, backends()[0])
			first, err := waiter.Lock(d, k).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			owned := context.WithoutCancel(first.Context())
			held, err := holder.Lock(d, k).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := inBackground(t, func() (*lockrt.Lease, error) { return waiter.Lock(d, k).Lock(owned) })
			waitRegistered(t, single.Client(), k, 1)
			owner, err := single.Client().LIndex(ctx, keys.Sub(k, "queue"), 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := single.Client().Publish(ctx, lockrt.WakeChannel(waiter, k), owner).Err(); err != nil {
				t.Fatal(err)
			}
			select {
			case le := <-got:
				t.Fatalf("the carried owner took a message Redis did not back as the lock (lease live: %t) while another holds it",
					le != nil && le.Context().Err() == nil)
			case <-time.After(500 * time.Millisecond):
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case le := <-got:
				if le == nil || le.Context().Err() != nil {
					t.Fatal("the carried owner did not get a live lease after the release")
				}
				_ = le.Unlock(ctx)
			case <-time.After(10 * time.Second):
				t.Fatal("the carried owner did not get the lock within 10s of the release")
			}
		})
	}
}

// TestSharedChannelCarriedOwner: with classic pub/sub a client's waiters
// share one wake-up channel per namespace, and a message names an owner,
// not an object. One owner, carried from an earlier lease, waits on two
// locks of the namespace at once (two goroutines, one context): the
// release of the first hands it to that owner, and the message may reach
// either wait (here the one on the second lock, which joined first).
// Neither wait takes a lock Redis did not hand it: the wait on the second
// lock confirms the message with an attempt and keeps waiting while its
// holder holds it, the wait on the first takes it (at the latest at its
// next refresh), and the second gets its lock once that is released.
func TestSharedChannelCarriedOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := processDef(lockrt.Reentrant)
	k1, k2, k0 := key(t, "one"), key(t, "two"), key(t, "zero")
	waiter, holder := newClient(t, backends()[0]), newClient(t, backends()[0])
	if lockrt.WakeChannel(waiter, k1) != lockrt.WakeChannel(waiter, k2) {
		t.Fatalf("%s and %s: two wake-up channels, want one shared", lockrt.WakeChannel(waiter, k1), lockrt.WakeChannel(waiter, k2))
	}
	first, err := waiter.Lock(d, k0).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owned := context.WithoutCancel(first.Context())
	held := make([]*lockrt.Lease, 2)
	for i, k := range []string{k1, k2} {
		if held[i], err = holder.Lock(d, k).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The wait on the second lock joins the channel first, so the hub
	// gives the owner's message to it (the first waiter of that owner).
	var got [2]<-chan *lockrt.Lease
	for _, i := range []int{1, 0} {
		k := []string{k1, k2}[i]
		got[i] = inBackground(t, func() (*lockrt.Lease, error) { return waiter.Lock(d, k).Lock(owned) })
		waitRegistered(t, single.Client(), k, 1)
		waitWaiting(t, waiter, k, 1, 2-i) // the wait on k2 joins first
	}
	if err := held[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case le := <-got[0]:
		if le == nil || le.Context().Err() != nil {
			t.Fatal("the wait on the released lock did not get a live lease")
		}
		_ = le.Unlock(ctx)
	case le := <-got[1]:
		t.Fatalf("the wait on the lock still held returned (a lease: %t): it took a hand-off of the other lock", le != nil)
	case <-time.After(5 * time.Second):
		t.Fatal("the wait on the released lock did not get it within 5s")
	}
	select {
	case le := <-got[1]:
		t.Fatalf("the wait on the lock still held returned (a lease: %t) while its holder holds it", le != nil)
	case <-time.After(500 * time.Millisecond):
	}
	if err := held[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case le := <-got[1]:
		if le == nil || le.Context().Err() != nil {
			t.Fatal("the second wait did not get a live lease after its lock's release")
		}
		_ = le.Unlock(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("the second wait did not get its lock within 5s of the release")
	}
	_ = first.Unlock(ctx)
}

// TestScriptDefaults: the arguments an uncontended Lock+Unlock leaves out
// have the meaning the runtime gives them. A first attempt of Lock sends
// no registry TTL (the acquire scripts' registry_ttl, held here to
// LiveRegistryTTL in their source): a waiter it registers gets a deadline
// LiveRegistryTTL away, and the holder still reads as holding. A single hold is stored as the owner alone; a
// re-entry counts two, and the release of one of a renewed lock's holds,
// sent without a lease, keeps the lock's TTL. Every lock kind with a
// registry, on one node.
func TestScriptDefaults(t *testing.T) {
	t.Parallel()
	want := fmt.Sprintf("local registry_ttl = '%d'", lockrt.LiveRegistryTTL.Milliseconds())
	for _, name := range []string{"reentrant_acquire", "simple_acquire", "fenced_acquire"} {
		if src := script(t, name).Source; !strings.Contains(src, want) {
			t.Errorf("%s does not say %q", name, want)
		}
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: single.Addr})
	t.Cleanup(func() { rdb.Close() })
	for _, kind := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Simple, lockrt.Fenced} {
		t.Run(kind.String(), func(t *testing.T) {
			d := def(t, kind, 30*time.Second, true, 0)
			k := key(t)
			holder, waiter := newClient(t, backends()[0]), newClient(t, backends()[0])
			le, err := lockimpl.NewLock(holder, d, k).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if kind == lockrt.Reentrant {
				if v := rdb.Get(ctx, k).Val(); strings.Contains(v, " ") {
					t.Errorf("one hold stored as %q, want the owner alone", v)
				}
				// Re-entered, one hold released without a lease: two holds,
				// then one, the TTL kept (not restarted to the lease).
				rdb.PExpire(ctx, k, 20*time.Second)
				inner, err := lockimpl.NewLock(holder, d, k).Lock(le.Context())
				if err != nil {
					t.Fatal(err)
				}
				// (then the re-entry's operation, see has_op in registry.luainc)
				if f := strings.Fields(rdb.Get(ctx, k).Val()); len(f) != 3 || f[1] != "2" || !strings.HasPrefix(f[2], "@") {
					t.Errorf("re-entered: %q, want the owner, 2 and the re-entry's operation", f)
				}
				rdb.PExpire(ctx, k, 20*time.Second)
				if err := le.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if ttl := rdb.PTTL(ctx, k).Val(); ttl > 20*time.Second {
					t.Errorf("a hold released without a lease: TTL %v, want the 20s it had kept", ttl)
				}
				if n, err := inner.IsHeld(ctx); err != nil || !n {
					t.Errorf("the hold left: IsHeld %v, %v", n, err)
				}
				if err := inner.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if le, err = lockimpl.NewLock(holder, d, k).Lock(ctx); err != nil { // one hold again
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() {
				l, err := lockimpl.NewLock(waiter, d, k).TryLock(ctx, 5*time.Second)
				if err == nil {
					err = l.Unlock(ctx)
				}
				done <- err
			}()
			var entries []redis.Z
			for start := time.Now(); len(entries) == 0; {
				if time.Since(start) > 5*time.Second {
					t.Fatal("no waiter registered within 5s")
				}
				time.Sleep(time.Millisecond)
				entries = rdb.ZRangeWithScores(ctx, k+":waiters", 0, -1).Val()
			}
			now, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			left := time.Duration(int64(entries[0].Score)-now.UnixMilli()) * time.Millisecond
			if left <= lockrt.RegistryTTL || left > lockrt.LiveRegistryTTL {
				t.Errorf("the waiter's entry runs out in %v, want within LiveRegistryTTL (%v), after RegistryTTL", left, lockrt.LiveRegistryTTL)
			}
			// The value now says a waiter waits (" w"): still one hold.
			if n, err := le.IsHeld(ctx); err != nil || !n {
				t.Errorf("held, %q: IsHeld %v, %v", rdb.Get(ctx, k).Val(), n, err)
			}
			if err := le.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Errorf("the waiter: %v", err)
			}
		})
	}
}
