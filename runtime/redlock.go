package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

func init() {
	impl.NewRedLock = func(q any, def *impl.RedLockDef, key string) any { return q.(*Quorum).newRedLock(def, key) }
}

// ErrNoQuorum: so many RedLock nodes failed to answer (down, unreachable,
// or slower than the per-node timeout) that a majority cannot be reached.
// The lock is not obtained, and the error also matches ErrNotObtained;
// it wraps the nodes' errors. Nothing is left locked on the nodes that
// answered.
var ErrNoQuorum = errors.New("lockgen: no majority of RedLock nodes reachable")

// Quorum is a set of independent Redis deployments, one Client each, on
// which RedLocks are taken: a lock is held when a majority of them
// (len/2+1) granted it within its validity. Use an odd number of nodes
// that fail independently, typically 5 (tolerating 2 down).
//
// A node whose last call failed with a network error is treated as down:
// calls do not wait for it, and it is probed at most once a second until
// it answers again, so a dead node costs no latency.
type Quorum struct {
	nodes []*Client
	state []nodeState

	wdOnce sync.Once
	wd     *watchdog.Watchdog // renews the quorum's RedLocks

	counts *redCounts // what the waits do, for tests (nil: not counted)

	nodeLimit time.Duration // SetNodeTimeout's (0: DefaultNodeTimeout)
}

// redCounts counts what the RedLock waits of the quorums that share it
// do, for tests (set through export_test): attempts by kind, how they
// ended, and the grace waits for a majority of wake-ups.
type redCounts struct {
	First, Woken, Refresh atomic.Int64 // attempts: a Lock's first, a woken waiter's, on the fallback timer
	Won                   atomic.Int64 // attempts that took a majority
	Split                 atomic.Int64 // attempts that took some nodes, not a majority
	WastedWake            atomic.Int64 // woken waiters' attempts that took no majority
	Grace                 atomic.Int64 // waits for wake-ups from a majority that ran out and tried anyway
	GraceNanos            atomic.Int64 // the time those grace waits took
}

// nodeState tracks whether a node is down.
type nodeState struct {
	mu     sync.Mutex
	down   bool
	probed time.Time // when a down node was last called
}

// probeEvery is how often a node known to be down is called again.
const probeEvery = time.Second

// NewQuorum returns a quorum over nodes, one client per independent Redis
// deployment. It does not contact Redis. The RedLocks of a quorum without
// nodes fail with ErrInvalidArgument.
func NewQuorum(nodes ...*Client) *Quorum {
	return &Quorum{nodes: slices.Clone(nodes), state: make([]nodeState, len(nodes))}
}

// Nodes returns the quorum's clients.
func (q *Quorum) Nodes() []*Client { return slices.Clone(q.nodes) }

// Majority returns how many nodes must grant a lock: len(nodes)/2 + 1.
func (q *Quorum) Majority() int { return len(q.nodes)/2 + 1 }

// RedLock returns the RedLock with the given definition (emitted by
// lockgen) and key on the quorum's nodes. It does not contact Redis.
func (q *Quorum) newRedLock(def *impl.RedLockDef, key string) *RedLock {
	return &RedLock{q: q, def: def, key: key, keys: []string{key, keys.Sub(key, "queue"), keys.Sub(key, "waiters")}}
}

// RedLock is a lock taken on a majority of independent Redis nodes (the
// Redlock algorithm): a generated constructor's result. It is not
// reentrant. See "RedLock" in docs/design.md for what it does
// and does not guarantee.
type RedLock struct {
	q    *Quorum
	def  *impl.RedLockDef
	key  string
	keys []string // on each node: the lock, its waiter registry's queue and waiters
}

// Key returns the lock's key, the same on every node.
func (r *RedLock) Key() string { return r.key }

// Name returns the lock's name in the spec.
func (r *RedLock) Name() string { return r.def.Name }

// channel is the prefix of the wake-up channels of r's waiters on the
// node of c (see wakePrefix).
func (r *RedLock) channel(c *Client) string { return c.wakePrefix(r.key) }

// ops returns r's script operations on node c (runtime/internal/rdb).
func (r *RedLock) ops(c *Client) rdb.RedLock {
	return rdb.RedLock{Conn: &c.conn, Scripts: r.def.Scripts, Key: r.key, Keys: r.keys}
}

// drift is the clock drift allowed for over a lease: the lease is trusted
// for this much less than its TTL on the nodes.
func drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// DefaultNodeTimeout is the most one node may take to answer a RedLock
// call, unless SetNodeTimeout says otherwise.
const DefaultNodeTimeout = time.Second

// SetNodeTimeout sets the most one node may take to answer a RedLock call
// of q: d, but never more than a third of the lock's lease, so that a
// slow node cannot use up the validity (d <= 0: DefaultNodeTimeout).
// Raise it for nodes far away or behind a busy network, where a reply
// may take longer than a second; a node that does not answer in time
// counts as not granting. Call it before q's first RedLock call; it
// returns q.
func (q *Quorum) SetNodeTimeout(d time.Duration) *Quorum {
	q.nodeLimit = max(d, 0)
	return q
}

// nodeTimeout is how long one node may take to answer a call for a lock
// of that lease: a fraction of the lease, so that a slow node cannot use
// up the validity, and at most the quorum's limit.
func (q *Quorum) nodeTimeout(lease time.Duration) time.Duration {
	limit := q.nodeLimit
	if limit == 0 {
		limit = DefaultNodeTimeout
	}
	return min(lease/3, limit)
}

// redLeaseKey is the context key of the RedLock lease a context was made
// by, to refuse re-entry.
type redLeaseKey struct{}

// Lock takes the lock on a majority of the nodes, waiting while another
// owner holds it: until the context's deadline when it has one, otherwise
// for the spec's default wait. Every node is asked at once, with a value
// new to this attempt; the lock is held when a majority granted it and
// the lease minus the time that took minus the allowed clock drift
// (lease/100 + 2ms) is still positive. Otherwise the attempt is undone on
// every node that granted it (or did not answer) before waiting or
// failing: the nodes still pending are waited for, within the per-node
// timeout and the context's deadline (past it, a node that answers later
// undoes its own grant in the background). A waiter is registered on each node that refused it and wakes
// when releases on a majority of the nodes woke it (or a short grace
// after the first), with the time a majority of the holder's keys expire
// as a fallback; see "RedLock" in docs/design.md.
//
// It returns ErrNoQuorum (matching ErrNotObtained too) when too many nodes
// failed to answer for a majority to be possible (at once on the first
// attempt; during the wait, matching the wait's error); ErrNotObtained when
// the wait ran out (also matching the context's error when the context
// ended it); ErrNotReentrant when ctx comes from a lease of this lock
// still held; ErrClosed when a node's client was closed;
// ErrInvalidArgument for a quorum without nodes or a lease option out of
// range. As with Lock, the context bounds the wait, not the hold, and a
// context that has ended already takes nothing.
func (r *RedLock) Lock(ctx context.Context, opts ...AcquireOption) (*RedLockLease, error) {
	return r.acquire(ctx, defaultWait(ctx, r.def.Wait), opts)
}

// TryLock takes the lock, waiting at most wait (0: try once) and no
// longer than the context allows. It returns the errors Lock returns,
// and ErrInvalidArgument for a negative wait.
func (r *RedLock) TryLock(ctx context.Context, wait time.Duration, opts ...AcquireOption) (*RedLockLease, error) {
	if err := checkWait(wait); err != nil {
		return nil, err
	}
	return r.acquire(ctx, wait, opts)
}

// acquire takes the lock; wait < 0 means as long as ctx allows.
func (r *RedLock) acquire(ctx context.Context, wait time.Duration, opts []AcquireOption) (le *RedLockLease, err error) {
	if len(r.q.nodes) == 0 {
		return nil, fmt.Errorf("%w: RedLock %s has no nodes", ErrInvalidArgument, r.def.Name)
	}
	o, err := acquireOpts(r.def.Lease, opts)
	if err != nil {
		return nil, err
	}
	for _, c := range r.q.nodes {
		if err := c.checkOpen(); err != nil {
			return nil, err
		}
	}
	if held, ok := ctx.Value(redLeaseKey{}).(*RedLockLease); ok && held.r.key == r.key && held.ctx.Err() == nil {
		return nil, fmt.Errorf("lockgen: acquiring %s: %w", r.key, ErrNotReentrant)
	}
	// An explicit wait bounds the attempts too (a node that does not
	// answer would hold one for the per-node timeout); a single try
	// (wait 0) is bounded by ctx and the per-node timeout alone.
	begin, actx := time.Now(), ctx
	if wait > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithDeadline(ctx, begin.Add(wait))
		defer cancel()
	}
	var members []string // this wait's member in each node's registry
	reg := time.Duration(0)
	if wait != 0 {
		reg = r.registryTTL()
		// A member leads with the wait's ticket, its first attempt's time,
		// the same on every node: a release wakes the smallest ticket among
		// the first waiters of its node's queue, so nodes that queued two
		// waiters in different orders still wake the same one.
		ticket := fmt.Sprintf("%016d@", time.Now().UnixMicro())
		members = make([]string, len(r.q.nodes))
		for i, c := range r.q.nodes {
			members[i] = ticket + c.newOwner()
		}
	}
	tried := time.Now() // (waitObject.tried)
	le, next, live, err := r.attempt(actx, o, members, reg, "0")
	if le != nil || err != nil {
		return le, err
	}
	if wait == 0 {
		return nil, ErrNotObtained
	}
	defer func() {
		if le == nil {
			cleanUp(ctx, func(ctx context.Context) { r.leave(ctx, all(len(r.q.nodes)), members) })
		}
	}()
	if wait > 0 {
		if wait -= time.Since(begin); wait <= 0 { // the first attempt took it all
			return nil, ErrNotObtained
		}
	}
	// Wait on the channels of this process on the nodes that answered or
	// were pending (not those that failed): a release on a
	// node wakes the longest-waiting waiter registered there, by name.
	// Each node's client refreshes the entries of its waiters there, all
	// of them in one call (its group of waiters at the node's registry),
	// and watches the node's hold: it wakes a waiter whose entry is gone
	// or whose node's hold ran out, which then tries again.
	srcs := make([]waitSource, len(live))
	obj := waitObject{tried: tried, regs: make([]*registration, len(live))}
	for j, i := range live {
		c := r.q.nodes[i]
		srcs[j] = waitSource{c: c, channel: r.channel(c) + ":" + c.id, owner: members[i]}
		obj.regs[j] = &registration{reg: rdb.Registry{Hold: r.keys[0], Queue: r.keys[1], Waiters: r.keys[2]},
			ttl: reg, member: members[i], pttl: next.wait, short: r.def.Lease <= 2*HandoffLease, fixed: !r.def.Renew}
	}
	// A release reaches the nodes one after the other as they answer:
	// trying at the first message would find the others still held.
	// Wait for messages from a majority of the nodes, or a short grace
	// after the first. Owners that split the nodes retry after a random
	// pause instead, so that one of them goes first.
	need := max(1, min(r.q.Majority(), len(srcs)))
	seen := make([]bool, len(srcs))
	woken := 0
	var notBefore time.Time // of the next attempt: after the split's pause or the grace
	var graceFrom time.Time // when the grace wait began
	splits := 0             // attempts in a row that split the nodes, before the last
	sleep := func() time.Duration {
		if !next.split {
			splits = 0
			if next.wait <= 2*HandoffLease {
				// A hand-off's reservation or a hold about to end, which
				// the groups watch only for a waiter at the head: look
				// then.
				return next.wait
			}
			return groupedSleep // (the nodes' groups watch the holds, and wake it)
		}
		notBefore = time.Now().Add(next.wait)
		d := splitSleep(next, reg, splits)
		splits++
		return d
	}
	// No EventWaitFallback (waitObject{}): the grace and the split's pause
	// use the timer too.
	err = waitOn(ctx, wait, obj, srcs, true, sleep(), func(msgs []string) (bool, time.Duration, error) {
		for j, m := range msgs {
			if m != "" && !seen[j] {
				seen[j] = true
				woken++
			}
		}
		if !next.split && woken > 0 && woken < need && notBefore.IsZero() {
			graceFrom = time.Now()
			notBefore = graceFrom.Add(min(2*next.took+time.Millisecond, 20*time.Millisecond))
		}
		if rest := time.Until(notBefore); rest > 0 && (next.split || woken < need) {
			return false, rest, nil
		}
		// One attempt answers every message received so far: a woken
		// waiter tries every node; on the fallback timer, a node that is
		// still held only refreshes this waiter's entry.
		flag := "2"
		if woken > 0 {
			flag = "1"
		}
		if c := r.q.counts; c != nil && !graceFrom.IsZero() && woken < need {
			c.Grace.Add(1)
			c.GraceNanos.Add(int64(time.Since(graceFrom)))
		}
		clear(seen)
		woken, notBefore, graceFrom = 0, time.Time{}, time.Time{}
		var err error
		le, next, _, err = r.attempt(actx, o, members, reg, flag)
		if le != nil || err != nil {
			return le != nil, 0, err
		}
		return false, sleep(), nil
	})
	if err != nil {
		return nil, err
	}
	return le, nil
}

// registryTTL is how long a waiter of r keeps its place in a node's
// registry unrefreshed: RedLockDef's WaiterTTL, else LiveRegistryTTL when
// every node's release can tell a waiter whose client went away (it
// passes it over: redlock_release), else RegistryTTL. Each node's client
// refreshes its waiters' entries there every third of it, all in one
// call (see Client.joinRefresh).
func (r *RedLock) registryTTL() time.Duration {
	if r.def.WaiterTTL > 0 {
		return r.def.WaiterTTL
	}
	for _, c := range r.q.nodes {
		if c.waitRegistryTTL() != LiveRegistryTTL {
			return RegistryTTL
		}
	}
	return LiveRegistryTTL
}

// splitSleep is how long a RedLock waiter whose entries last reg sleeps
// after an attempt that split the nodes (granted some, not a majority)
// when no message comes: the split's pause, grown 4x for each of the
// splits in a row before this one but the first, up to when a majority
// of the keys held elsewhere expire and no longer than reg/3. (After any
// other failed attempt it sleeps until a majority of the keys in its way
// expire when that is within 2 HandoffLease, a hand-off's reservation for
// another waiter or a hold about to end; else groupedSleep: the groups of
// waiters of its node clients refresh its entries and watch the nodes'
// holds, and wake it.)
//
// Owners that split the nodes between them go again after a pause or
// two. An attempt granted in a minority again and again is refused by an
// owner that holds a majority but not every node (a node restarted
// empty, or the holder's call to it came late): no split to resolve by
// retrying soon. Backed off, its waiter waits for that owner's release,
// registered on the nodes that refused it, as any waiter does
// (TestRedLockMinorityFreeWaitCost: 3 178 scripts in 3 s before).
func splitSleep(next retry, reg time.Duration, splits int) time.Duration {
	return min(next.wait<<(2*min(max(splits-1, 0), 10)), max(next.held, next.wait), reg/3)
}

// retry says when to try again after a failed attempt.
type retry struct {
	wait  time.Duration
	split bool          // the attempt took some nodes, not a majority
	took  time.Duration // how long the attempt took
	// held, after a split, is the wait until a majority of the keys held
	// elsewhere expire (wait's, when not a split).
	held time.Duration
}

// attempt asks every node for the lock once, with a value of its own. It
// returns a lease when a majority granted it in time; otherwise it undoes
// the attempt wherever it may have been granted, and says when to retry
// and which nodes may be waited on: those that answered, and those whose
// answer was still pending at the verdict. It takes nothing when ctx has ended, and
// gives back what it took when ctx ended meanwhile.
//
// members names the waiter in each node's registry and reg is how long
// an entry lasts (0: the caller does not wait, and registers nowhere);
// flag is redlock_acquire's: "0" for a first attempt, "1" for a woken
// waiter, "2" for a waiter's refresh. A won attempt leaves the registry
// of the nodes that refused it.
func (r *RedLock) attempt(ctx context.Context, o acquireOptions, members []string, reg time.Duration, flag string) (*RedLockLease, retry, []int, error) {
	if err := ctx.Err(); err != nil {
		return nil, retry{}, nil, waitError(ctx, err)
	}
	lease := o.lease
	n, majority := len(r.q.nodes), r.q.Majority()
	value := r.q.nodes[0].newOwner()
	start := time.Now()
	var won *RedLockLease // set before settle when the attempt won
	acquire := func(ctx context.Context, i int, c *Client) *redis.Cmd {
		member := ""
		if members != nil {
			member = members[i]
		}
		return r.ops(c).Acquire(ctx, lease, value, member, reg, flag)
	}
	granted := func(cmd *redis.Cmd) bool {
		res, err := cmd.Int64Slice()
		return err == nil && len(res) == 2 && res[0] == 1
	}
	decided := func(cmds []*redis.Cmd) bool {
		took, failed := 0, 0
		for _, cmd := range cmds {
			switch {
			case cmd == nil:
			case granted(cmd):
				took++
			default:
				failed++
			}
		}
		return took >= majority || failed > n-majority
	}
	// A node that answers after the verdict undoes a failed attempt (or
	// a won one already unlocked) itself, after its own grant, so that
	// the release cannot overtake the grant; one that refused a won
	// attempt has registered the waiter, which leaves it.
	late := func(i int, cmd *redis.Cmd) {
		if won != nil {
			won.landed(i, cmd, granted(cmd))
			if reg > 0 && cmd.Err() == nil && !granted(cmd) {
				r.leave(context.Background(), []int{i}, members)
			}
		} else if granted(cmd) || cmd.Err() != nil {
			r.releaseOn(i, value, redUndo)
		}
	}
	// Not cut short by ctx: a lock a node granted while the reply was
	// abandoned would stay there for a lease.
	f := r.q.fanout(ctx, r.q.nodeTimeout(lease), all(n), false, acquire, decided, late)
	if took := f.count(granted); took < majority {
		// Lost: the nodes still pending are waited for (within ctx), so
		// that what they granted is undone before the call returns.
		f.rest(ctx)
	}
	var (
		grants []int // nodes that granted it
		undo   []int // nodes that granted it or failed
		live   []int // nodes that answered or are pending
		refuse []int // nodes that answered that another value holds it
		pttls  []time.Duration
		errs   []error
	)
	for i, cmd := range f.replies {
		if cmd == nil { // pending after an early verdict: late undoes it
			live = append(live, i)
			continue
		}
		res, err := cmd.Int64Slice() // redlock_acquire reply: {int, int}
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("unexpected reply %v", res)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
			undo = append(undo, i)
			continue
		}
		live = append(live, i)
		if res[0] == 1 {
			grants = append(grants, i)
			undo = append(undo, i)
		} else {
			refuse = append(refuse, i)
			pttls = append(pttls, time.Duration(res[1])*time.Millisecond)
		}
	}
	validity := lease - time.Since(start) - drift(lease)
	if r.q.counts != nil {
		c := r.q.counts
		map[string]*atomic.Int64{"0": &c.First, "1": &c.Woken, "2": &c.Refresh}[flag].Add(1)
		switch {
		case len(grants) >= majority && validity > 0:
			c.Won.Add(1)
		case flag == "1":
			c.WastedWake.Add(1)
		}
		if len(grants) > 0 && len(grants) < majority {
			c.Split.Add(1)
		}
	}
	if len(grants) >= majority && validity > 0 {
		won = r.newLease(ctx, value, o, start, f.inflight())
		f.settle()
		if reg > 0 && len(refuse) > 0 {
			// Registered where it was refused: leave there.
			cleanUp(ctx, func(ctx context.Context) { r.leave(ctx, refuse, members) })
		}
		if err := ctx.Err(); err != nil {
			// Cancelled while the nodes answered: give it back.
			cleanUp(ctx, func(ctx context.Context) { _ = won.Unlock(ctx) })
			return nil, retry{}, live, waitError(ctx, err)
		}
		return won, retry{}, live, nil
	}
	f.settle()
	cleanUpWithin(ctx, func(ctx context.Context) { r.release(ctx, undo, value, redUndo) })
	elapsed := time.Since(start)
	switch {
	case len(errs) > n-majority:
		return nil, retry{}, live, fmt.Errorf("%w (%w): %s: %d of %d nodes failed: %w",
			ErrNoQuorum, ErrNotObtained, r.key, len(errs), n, errors.Join(errs...))
	case len(grants) >= majority: // the validity ran out while asking: retry now
		return nil, retry{took: elapsed}, live, nil
	}
	// A majority is free once enough of the holders' keys expire.
	slices.Sort(pttls)
	next := time.Second
	if majority <= len(pttls) {
		next = fallback(pttls[majority-1])
	}
	if len(grants) > 0 {
		// A random pause of up to a few attempts' time lets one of the
		// owners that split the nodes go first.
		pause := rand.N(3*elapsed + time.Millisecond)
		return nil, retry{wait: pause, split: true, took: elapsed, held: next}, live, nil
	}
	return nil, retry{wait: next, took: elapsed}, live, nil
}

// all returns 0..n-1.
func all(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// How redlock_release runs (its mode ARGV).
const (
	redRelease = "0" // a hold's release: wakes a waiter of the node
	redLeave   = "1" // a waiter that gives up leaves the registry
	redUndo    = "2" // a failed attempt's undoing: wakes nobody
)

// releaseCmd runs redlock_release on node c for value (a hold's value, or
// with redLeave a waiter's member) in mode.
func (r *RedLock) releaseCmd(ctx context.Context, c *Client, value any, mode string) *redis.Cmd {
	return r.ops(c).Release(ctx, value, mode)
}

// release compare-and-deletes value on the given nodes, each of which
// wakes its longest-waiting waiter, if any; it returns how many nodes
// released it, and the errors.
func (r *RedLock) release(ctx context.Context, nodes []int, value, mode string) (int, error) {
	if len(nodes) == 0 {
		return 0, nil
	}
	f := r.q.fanout(ctx, r.q.nodeTimeout(r.def.Lease), nodes, true, func(ctx context.Context, _ int, c *Client) *redis.Cmd {
		if mode != redRelease {
			return r.releaseCmd(ctx, c, value, mode)
		}
		// A release whose reply was lost is sent again (by go-redis, or
		// by resolve when go-redis gave up): a run that finds the value
		// gone after a resend is this call's own second run.
		arg := rdb.NewCounted(value)
		cmd := resolve(ctx, r.releaseCmd(ctx, c, arg, mode), func() *redis.Cmd { return r.releaseCmd(ctx, c, arg, mode) })
		if n, err := cmd.Int(); err == nil && n == -1 && arg.Sends() > 1 {
			cmd.SetVal(int64(0))
		}
		return cmd
	}, nil, nil)
	replies := f.replies
	released := 0
	var errs []error
	for _, i := range nodes {
		cmd := replies[i]
		if cmd == nil {
			errs = append(errs, fmt.Errorf("node %d: no reply", i))
			continue
		}
		switch n, err := cmd.Int(); { // redlock_release reply: int
		case err != nil:
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
		case n == 0:
			released++
		}
	}
	return released, errors.Join(errs...)
}

// leave takes a waiter that gives up (members, by node) out of the
// registry of the given nodes, at once; a wake-up a node sent it goes on
// to that node's next waiter. It is best effort: an entry left behind is
// passed over after its deadline.
func (r *RedLock) leave(ctx context.Context, nodes []int, members []string) {
	if len(nodes) == 0 || members == nil {
		return
	}
	r.q.fanout(ctx, r.q.nodeTimeout(r.def.Lease), nodes, false, func(ctx context.Context, i int, c *Client) *redis.Cmd {
		return r.releaseCmd(ctx, c, members[i], redLeave)
	}, nil, nil)
}

// releaseOn compare-and-deletes value on node i, in the background.
func (r *RedLock) releaseOn(i int, value, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.q.nodeTimeout(r.def.Lease))
	defer cancel()
	cmd := r.releaseCmd(ctx, r.q.nodes[i], value, mode)
	r.q.mark(i, cmd.Err())
}

// ForceUnlock deletes the lock on every node whoever holds it, and wakes
// its waiters; the holder's lease is cancelled with ErrLockLost at its
// next renewal. It returns how many nodes held it, and the errors of the
// nodes that did not answer, joined.
func (r *RedLock) ForceUnlock(ctx context.Context) (int, error) {
	replies := r.q.fanout(ctx, r.q.nodeTimeout(r.def.Lease), all(len(r.q.nodes)), true, func(ctx context.Context, _ int, c *Client) *redis.Cmd {
		ch := rdb.NewCounted(r.channel(c)) // a resend that finds it gone: it was held (see Lock.ForceUnlock)
		cmd := r.ops(c).ForceUnlock(ctx, ch)
		if n, err := cmd.Int(); err == nil && n == 0 && ch.Sends() > 1 {
			cmd.SetVal(int64(1))
		}
		return cmd
	}, nil, nil).replies
	deleted := 0
	var errs []error
	for i, cmd := range replies {
		if cmd == nil {
			errs = append(errs, fmt.Errorf("lockgen: force-unlocking %s on node %d: no reply", r.key, i))
			continue
		}
		switch n, err := cmd.Int(); { // force_unlock reply: int
		case err != nil:
			errs = append(errs, fmt.Errorf("lockgen: force-unlocking %s on node %d: %w", r.key, i, err))
		case n == 1:
			deleted++
		}
	}
	return deleted, errors.Join(errs...)
}

// mark records the outcome of a call to node i: a network error (no
// reply from Redis) marks it down, anything else up.
func (q *Quorum) mark(i int, err error) {
	var rerr redis.Error
	down := err != nil && !errors.As(err, &rerr)
	st := &q.state[i]
	st.mu.Lock()
	st.down = down
	st.mu.Unlock()
}

// isDown reports whether node i is known to be down.
func (q *Quorum) isDown(i int) bool {
	st := &q.state[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.down
}

// plan says whether to call node i now, and whether to wait for it: a
// node known to be down is not waited for, and called once per probeEvery
// unless always.
func (q *Quorum) plan(i int, always bool) (call, wait bool) {
	st := &q.state[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case !st.down:
		return true, true
	case always || time.Since(st.probed) >= probeEvery:
		st.probed = time.Now()
		return true, false
	}
	return false, false
}

// fanout runs call on the given nodes at once, each bounded by timeout
// and not by ctx's cancellation. It returns their replies indexed by node
// as soon as decided (if not nil) says the replies so far settle the
// outcome, every node waited for has answered, or timeout passed. Nodes
// known to be down are not waited for, and only probed now and then
// (every time with always, for releases, which must reach every node that
// may hold the lock): their reply is an error unless they answer in time.
// So is the reply of a node that timed out. A node still pending after an
// early decision has a nil reply; rest collects such replies later.
// After settle is called, late (if not nil) runs for each node whose
// reply was not collected, in that node's goroutine, after its call, so
// that it can undo it. Call settle once.
func (q *Quorum) fanout(ctx context.Context, timeout time.Duration, nodes []int, always bool, call func(ctx context.Context, i int, c *Client) *redis.Cmd,
	decided func([]*redis.Cmd) bool, late func(i int, cmd *redis.Cmd)) *fan {
	failed := func(format string, args ...any) *redis.Cmd { return rdb.Failed(ctx, fmt.Errorf(format, args...)) }
	base := context.WithoutCancel(ctx)
	f := &fan{
		replies:   make([]*redis.Cmd, len(q.nodes)),
		out:       make(chan fanReply, len(nodes)),
		collected: make([]atomic.Bool, len(q.nodes)),
		called:    make([]bool, len(q.nodes)),
		end:       time.Now().Add(timeout),
	}
	settled := make(chan struct{})
	f.settle = sync.OnceFunc(func() { close(settled) })
	waited := make([]bool, len(q.nodes))
	pending := 0
	for _, i := range nodes {
		do, wait := q.plan(i, always)
		f.called[i] = do
		if wait {
			waited[i] = true
			pending++
		} else {
			f.replies[i] = failed("node down")
		}
		if !do {
			continue
		}
		c := q.nodes[i]
		go func() {
			cctx, cancel := context.WithTimeout(base, timeout)
			cmd := call(cctx, i, c)
			cancel()
			q.mark(i, cmd.Err())
			f.out <- fanReply{i, cmd}
			if late != nil {
				<-settled
				if !f.collected[i].Load() {
					late(i, cmd)
				}
			}
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	timedOut := false
	for pending > 0 && (decided == nil || !decided(f.replies)) {
		select {
		case r := <-f.out:
			f.take(r)
			if waited[r.i] {
				pending--
			}
		case <-timer.C:
			pending, timedOut = 0, true
		case <-ctx.Done():
			pending = 0 // the nodes still pending have nil replies
		}
	}
	for _, i := range nodes {
		if timedOut && f.replies[i] == nil {
			f.replies[i] = failed("no reply within %v", timeout)
			f.end = time.Time{} // rest has nothing to wait for
		}
	}
	return f
}

// fan is a fanout under way.
type fan struct {
	replies   []*redis.Cmd // by node: nil while pending
	settle    func()       // lets late run for the replies not collected
	out       chan fanReply
	collected []atomic.Bool
	called    []bool
	end       time.Time // of the nodes' timeout
}

type fanReply struct {
	i   int
	cmd *redis.Cmd
}

func (f *fan) take(r fanReply) {
	f.replies[r.i] = r.cmd
	f.collected[r.i].Store(true)
}

// count counts the replies collected that match.
func (f *fan) count(match func(*redis.Cmd) bool) int {
	n := 0
	for _, cmd := range f.replies {
		if cmd != nil && match(cmd) {
			n++
		}
	}
	return n
}

// inflight lists the nodes called whose reply was not collected.
func (f *fan) inflight() []int {
	var nodes []int
	for i, called := range f.called {
		if called && !f.collected[i].Load() {
			nodes = append(nodes, i)
		}
	}
	return nodes
}

// rest collects the replies still pending, until every node called has
// answered, the nodes' timeout passed or ctx ended; call it before
// settle.
func (f *fan) rest(ctx context.Context) {
	left := len(f.inflight())
	if left == 0 || f.end.IsZero() {
		return
	}
	timer := time.NewTimer(time.Until(f.end))
	defer timer.Stop()
	for ; left > 0; left-- {
		select {
		case r := <-f.out:
			f.take(r)
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// RedLockLease is one hold of a RedLock. Its Context is cancelled when the
// hold ends: with cause ErrLockLost when a majority can no longer be
// counted on (renewal found the lock gone or taken on too many nodes, or
// could not renew it on a majority before its validity ran out),
// ErrClosed when a node's client was closed, and context.Canceled after
// Unlock.
type RedLockLease struct {
	r      *RedLock
	value  string // this hold's value on the nodes
	lease  time.Duration
	ctx    *holdContext
	expiry *time.Timer // without renewal: fires when the validity runs out

	mu         sync.Mutex
	validUntil time.Time
	unlocked   bool
	swept      bool          // Unlock chose the nodes it releases: a grant that lands later releases itself
	inflight   map[int]bool  // nodes whose grant was not answered yet
	allLanded  chan struct{} // closed when inflight empties (nil when it is empty)
}

func (r *RedLock) newLease(parent context.Context, value string, o acquireOptions, start time.Time, inflight []int) *RedLockLease {
	lease := o.lease
	le := &RedLockLease{r: r, value: value, lease: lease, validUntil: start.Add(lease - drift(lease)), inflight: map[int]bool{}}
	for _, i := range inflight {
		le.inflight[i] = true
	}
	if len(inflight) > 0 {
		le.allLanded = make(chan struct{})
	}
	ctx := context.WithValue(context.WithValue(parent, ownerKey{}, value), redLeaseKey{}, le)
	le.ctx = newHoldContext(ctx, o.parentCancel, le.validUntil, ErrLockLost)
	if !r.def.Renew {
		le.expiry = time.AfterFunc(time.Until(le.validUntil), func() { le.ctx.end(ErrLockLost) })
		return le
	}
	// The quorum's watchdog is never closed: add cannot fail.
	_ = r.q.watchdog().Add(le.held(), watchdog.Renewal{
		Script: r.def.Scripts.Renew,
		Keys:   []string{r.key},
		Args:   []any{lease.Milliseconds(), value},
		Lease:  lease,
		Valid:  lease - drift(lease),
		Nodes:  le.landedNodes,
	}, (*redHold)(le), start)
	return le
}

// held identifies the lease's hold for the quorum's watchdog.
func (le *RedLockLease) held() watchdog.Key { return watchdog.Key{Key: le.r.key, Owner: le.value} }

// cancel ends the lease's context with cause; the watchdog calls it.
func (le *RedLockLease) cancel(cause error) { le.ctx.end(cause) }

// extend moves the validity on to until after a renewal; the watchdog
// calls it. It reports false when the validity had run out already.
func (le *RedLockLease) extend(until time.Time) bool {
	if !le.ctx.extend(until) {
		return false
	}
	le.mu.Lock()
	le.validUntil = until
	le.mu.Unlock()
	return true
}

// watchdog returns the quorum's watchdog, which renews every renewable
// RedLock held through the quorum: one goroutine while any is held, one
// pipeline per node per round.
func (q *Quorum) watchdog() *watchdog.Watchdog {
	q.wdOnce.Do(func() { q.wd = watchdog.New(q.renew) })
	return q.wd
}

// renew renews the RedLocks of batch, sent at sent, on every node at
// once: one pipeline per node, of the holds whose grant landed there. A
// hold is renewed when a majority of the nodes extended it within its
// validity, lost when more than len(nodes)-majority answered that it is
// not held, and tried again soon otherwise. Nodes known to be down are
// probed now and then, not waited for; a closed node client ends every
// hold with ErrClosed.
func (q *Quorum) renew(ctx context.Context, batch []*watchdog.Held, sent time.Time) {
	for _, c := range q.nodes {
		if c.checkOpen() != nil {
			for _, h := range batch {
				h.Outcome = watchdog.Closed
			}
			return
		}
	}
	lease := batch[0].Renew.Lease
	on := make([][]int, len(q.nodes)) // node -> indexes in batch
	for bi, h := range batch {
		lease = min(lease, h.Renew.Lease)
		nodes := all(len(q.nodes))
		if h.Renew.Nodes != nil {
			nodes = h.Renew.Nodes()
		}
		for _, i := range nodes {
			on[i] = append(on[i], bi)
		}
	}
	type reply struct {
		idx  []int
		cmds []*redis.Cmd
	}
	out := make(chan reply, len(q.nodes))
	waiting := 0
	for i, idx := range on {
		if len(idx) == 0 {
			continue
		}
		call, wait := q.plan(i, false)
		if !call {
			continue
		}
		if wait {
			waiting++
		}
		sub := make([]*watchdog.Held, len(idx))
		for j, bi := range idx {
			sub[j] = batch[bi]
		}
		go func() {
			// Not cut short when renew returns before this node
			// answered: its renewal still counts on the node.
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.nodeTimeout(lease))
			defer cancel()
			cmds := watchdog.RenewOn(nctx, q.nodes[i].rdb, sub, nil)
			var err error
			for _, cmd := range cmds {
				if err = cmd.Err(); err == nil || errors.Is(err, redis.Nil) {
					err = nil
					break
				}
			}
			q.mark(i, err)
			if wait {
				out <- reply{idx, cmds}
			}
		}()
	}
	n, majority := len(q.nodes), q.Majority()
	renews := make([]int, len(batch))
	gone := make([]int, len(batch))
	// Stop waiting as soon as every hold's verdict is in: a slow node
	// must not delay the others (its goroutine ends on its own).
	decided := func() bool {
		for bi := range batch {
			if renews[bi] < majority && gone[bi] <= n-majority {
				return false
			}
		}
		return true
	}
	for ; waiting > 0 && !decided(); waiting-- {
		r := <-out
		for j, cmd := range r.cmds {
			switch watchdog.RenewOutcome(cmd) {
			case watchdog.Renewed:
				renews[r.idx[j]]++
			case watchdog.Lost:
				gone[r.idx[j]]++
			}
		}
	}
	for bi, h := range batch {
		switch {
		case renews[bi] >= majority && time.Now().Before(sent.Add(h.Renew.ValidFor())):
			h.Outcome = watchdog.Renewed
		case gone[bi] > n-majority:
			// Too many nodes answered that the lock is not ours: a
			// majority is lost for good.
			h.Outcome = watchdog.Lost
		default:
			h.Outcome = watchdog.Again
		}
	}
}

// landed records the late answer of node i to the acquisition; when
// Unlock gave up waiting for it, it releases the node now, after its
// grant.
func (le *RedLockLease) landed(i int, cmd *redis.Cmd, granted bool) {
	le.mu.Lock()
	delete(le.inflight, i)
	if len(le.inflight) == 0 && le.allLanded != nil {
		close(le.allLanded)
		le.allLanded = nil
	}
	swept := le.swept
	le.mu.Unlock()
	if swept && (granted || cmd.Err() != nil) {
		le.r.releaseOn(i, le.value, redRelease)
	}
}

// landedNodes returns the nodes whose answer to the acquisition came.
func (le *RedLockLease) landedNodes() []int {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.landedNodesLocked()
}

// landedNodesLocked is landedNodes with le.mu held.
func (le *RedLockLease) landedNodesLocked() []int {
	var nodes []int
	for i := range le.r.q.nodes {
		if !le.inflight[i] {
			nodes = append(nodes, i)
		}
	}
	return nodes
}

// Context returns the lease's context: it carries the values of the
// context given to Lock, and ends when the hold ends (see RedLockLease),
// not when the context given to Lock does, unless WithParentCancel. Its
// Err and Done consult ValidUntil on the local clock when called.
func (le *RedLockLease) Context() context.Context {
	if le == nil {
		return endedContext(ErrNotHeld)
	}
	return le.ctx
}

// ValidUntil returns the local time until which the lock is held on a
// majority of the nodes, as far as this client can tell: the start of the
// last successful acquisition or renewal, plus the lease, minus the
// allowed clock drift.
func (le *RedLockLease) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.validUntil
}

// Unlock releases the lock on every node (compare-and-delete; the nodes
// that do not answer let it expire after the lease); each node where a
// waiter is registered wakes its longest-waiting one and reserves the
// node for it (see "RedLock" in docs/design.md).
// Like Lease.Unlock, it completes although ctx was cancelled (each node
// is given the per-node timeout). It returns ErrNotHeld when the lease was
// already unlocked or no node still held it, ErrLockLost when the lease
// was known to be lost (also by ValidUntil), or ErrNotReleased wrapping
// the nodes' errors when none could be reached.
func (le *RedLockLease) Unlock(ctx context.Context) error {
	if le == nil { // a failed TryLock's
		return ErrNotHeld
	}
	le.mu.Lock()
	if le.unlocked {
		le.mu.Unlock()
		return ErrNotHeld
	}
	le.unlocked = true
	pending := le.allLanded
	var up bool
	for i := range le.inflight {
		up = up || !le.r.q.isDown(i)
	}
	le.mu.Unlock()
	// A grant still on its way (Lock returned once a majority granted
	// it) is waited for, within the per-node timeout, so that this
	// release does not overtake it and a next Lock does not find it; a
	// node known to be down is not waited for.
	if pending != nil && up {
		t := time.NewTimer(le.r.q.nodeTimeout(le.lease))
		select {
		case <-pending:
		case <-t.C:
		}
		t.Stop()
	}
	le.mu.Lock()
	// The nodes whose grant is still on its way now release it
	// themselves when it lands (see landed); each node is released once.
	le.swept = true
	nodes := le.landedNodesLocked()
	le.mu.Unlock()
	if le.expiry != nil {
		le.expiry.Stop()
	} else {
		le.r.q.watchdog().Remove(le.held(), (*redHold)(le))
	}
	lost := le.ctx.Err() != nil && errors.Is(context.Cause(le.ctx), ErrLockLost)
	le.ctx.end(nil)
	released, err := le.r.release(context.WithoutCancel(ctx), nodes, le.value, redRelease)
	switch {
	case lost:
		return ErrLockLost
	case released > 0:
		return nil
	case err != nil:
		return notReleased(le.r.key, err)
	}
	return ErrNotHeld
}
