package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
)

// ErrNoQuorum: so many RedLock nodes failed to answer (down, unreachable,
// or slower than the per-node timeout) that a majority cannot be reached.
// The lock is not obtained, and the error also matches ErrNotObtained;
// it wraps the nodes' errors. Nothing is left locked on the nodes that
// answered.
var ErrNoQuorum = errors.New("lockgen: no majority of RedLock nodes reachable")

// RedLockDef is the static definition of a redlock lock declared in a
// spec. Its scripts are a simple lock's (SET NX PX, compare-and-delete,
// compare-and-pexpire), run on every node.
type RedLockDef struct {
	Name    string // the spec's name, for errors
	Lease   time.Duration
	Renew   bool          // renewed on a majority while held
	Wait    time.Duration // default wait of Lock
	Scripts *LockScripts
}

// Quorum is a set of independent Redis deployments, one Client each, on
// which RedLocks are taken: a lock is held when a majority of them
// (len/2+1) granted it within its validity. Use an odd number of nodes
// that fail independently, typically 5 (tolerating 2 down).
type Quorum struct {
	nodes []*Client
}

// NewQuorum returns a quorum over nodes, one client per independent Redis
// deployment. It does not contact Redis. The RedLocks of a quorum without
// nodes fail with ErrInvalidArgument.
func NewQuorum(nodes ...*Client) *Quorum {
	return &Quorum{nodes: slices.Clone(nodes)}
}

// Nodes returns the quorum's clients.
func (q *Quorum) Nodes() []*Client { return slices.Clone(q.nodes) }

// Majority returns how many nodes must grant a lock: len(nodes)/2 + 1.
func (q *Quorum) Majority() int { return len(q.nodes)/2 + 1 }

// RedLock returns the RedLock with the given definition (emitted by
// lockgen) and key on the quorum's nodes. It does not contact Redis.
func (q *Quorum) RedLock(def *RedLockDef, key string) *RedLock {
	return &RedLock{q: q, def: def, key: key}
}

// RedLock is a lock taken on a majority of independent Redis nodes (the
// Redlock algorithm): a generated constructor's result. It is not
// reentrant. See "RedLock" in the package documentation for what it does
// and does not guarantee.
type RedLock struct {
	q   *Quorum
	def *RedLockDef
	key string
}

// Key returns the lock's key, the same on every node.
func (r *RedLock) Key() string { return r.key }

// Name returns the lock's name in the spec.
func (r *RedLock) Name() string { return r.def.Name }

func (r *RedLock) channel() string { return keys.Sub(r.key, "ch") }

// drift is the clock drift allowed for over a lease: the lease is trusted
// for this much less than its TTL on the nodes.
func drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// nodeTimeout is how long one node may take to answer: small against the
// lease, so that a dead node does not use up the validity.
func nodeTimeout(lease time.Duration) time.Duration { return min(lease/5, time.Second) }

// Lock takes the lock on a majority of the nodes, waiting while another
// owner holds it: until the context's deadline when it has one, otherwise
// for the spec's default wait. Every node is asked at once; the lock is
// held when a majority granted it and the lease minus the time that took
// minus the allowed clock drift (lease/100 + 2ms) is still positive.
// Otherwise it is released on every node before waiting or failing. The
// waiter wakes on a release message from any node, with the time a
// majority of the holder's keys expire as a fallback.
//
// It returns ErrNoQuorum (matching ErrNotObtained too) when too many nodes
// failed to answer for a majority to be possible; ErrNotObtained when
// the wait ran out (also matching the context's error when the context
// ended it); ErrNotReentrant when the owner in ctx holds it already;
// ErrClosed when a node's client was closed; ErrInvalidArgument for a
// quorum without nodes.
func (r *RedLock) Lock(ctx context.Context) (*RedLockLease, error) {
	if _, ok := ctx.Deadline(); ok {
		return r.acquire(ctx, -1)
	}
	return r.acquire(ctx, r.def.Wait)
}

// TryLock takes the lock, waiting at most wait (0: try once) and no
// longer than the context allows. It returns the errors Lock returns,
// and ErrInvalidArgument for a negative wait.
func (r *RedLock) TryLock(ctx context.Context, wait time.Duration) (*RedLockLease, error) {
	if wait < 0 {
		return nil, fmt.Errorf("%w: negative wait %v", ErrInvalidArgument, wait)
	}
	return r.acquire(ctx, wait)
}

// acquire takes the lock; wait < 0 means as long as ctx allows.
func (r *RedLock) acquire(ctx context.Context, wait time.Duration) (le *RedLockLease, err error) {
	if len(r.q.nodes) == 0 {
		return nil, fmt.Errorf("%w: RedLock %s has no nodes", ErrInvalidArgument, r.def.Name)
	}
	for _, c := range r.q.nodes {
		if err := c.checkOpen(); err != nil {
			return nil, err
		}
	}
	owner := r.q.nodes[0].ownerFrom(ctx)
	le, next, live, err := r.attempt(ctx, owner)
	if le != nil || err != nil {
		return le, err
	}
	if wait == 0 {
		return nil, ErrNotObtained
	}
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		wctx, cancel = context.WithTimeout(ctx, wait)
	}
	defer cancel()

	subs := r.subscribe(wctx, live)
	defer func() {
		for _, s := range subs {
			s.c.hub.leave(s.sub, s.w, le != nil)
			s.c.hub.unsubscribe(s.sub)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// Wait on the context, the fallback timer, every node client's
	// closing and every node's release messages.
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(wctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
	}
	for _, c := range r.q.nodes {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.hub.closedCh())})
	}
	for _, s := range subs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.w.signal)})
	}
	for {
		if next.split {
			// Two owners split the nodes and both released theirs: the
			// release messages would wake both at once again. Retry
			// after a random pause instead, so one of them goes first.
			timer.Reset(next.wait)
			select {
			case <-timer.C:
			case <-wctx.Done():
				return nil, waitError(ctx, wctx.Err())
			}
		} else {
			timer.Reset(next.wait)
			switch chosen, _, _ := reflect.Select(cases); {
			case chosen == 0:
				return nil, waitError(ctx, wctx.Err())
			case chosen < 2+len(r.q.nodes) && chosen >= 2:
				return nil, ErrClosed
			}
		}
		// A release publishes on every node: one attempt answers them all.
		for _, s := range subs {
			select {
			case <-s.w.signal:
			default:
			}
		}
		le, next, _, err = r.attempt(ctx, owner)
		if le != nil || err != nil {
			return le, err
		}
	}
}

// retry says when to try again after a failed attempt.
type retry struct {
	wait  time.Duration
	split bool // the attempt took some nodes, not a majority
}

// attempt asks every node for the lock once. It returns a lease when a
// majority granted it in time; otherwise it releases it everywhere it may
// have been set and says when to retry, and which nodes answered.
func (r *RedLock) attempt(ctx context.Context, owner string) (*RedLockLease, retry, []int, error) {
	lease := r.def.Lease
	start := time.Now()
	// Not cut short by ctx: a lock a node granted while the reply was
	// abandoned would stay there for a lease.
	replies := r.q.each(context.WithoutCancel(ctx), nodeTimeout(lease), func(ctx context.Context, c *Client) *redis.Cmd {
		return c.eval(ctx, r.def.Scripts.Acquire, []string{r.key}, lease.Milliseconds(), owner)
	})
	var (
		took, mine int
		live       []int
		pttls      []time.Duration
		errs       []error
	)
	for i, cmd := range replies {
		res, err := cmd.Int64Slice()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("unexpected reply %v", res)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
			continue
		}
		live = append(live, i)
		switch res[0] {
		case 1:
			took++
		case -1:
			mine++
		default:
			pttls = append(pttls, time.Duration(res[1])*time.Millisecond)
		}
	}
	n, majority := len(r.q.nodes), r.q.Majority()
	validity := lease - time.Since(start) - drift(lease)
	if took >= majority && validity > 0 {
		return r.newLease(ctx, owner, start), retry{}, live, nil
	}
	if took > 0 || len(errs) > 0 {
		// Release wherever the lock may have been set, including the
		// nodes whose reply was lost. The owner's earlier hold, if any,
		// is not this attempt's to release.
		if mine == 0 {
			_ = r.release(context.WithoutCancel(ctx), owner)
		}
	}
	switch {
	case mine > 0:
		return nil, retry{}, live, fmt.Errorf("lockgen: acquiring %s: %w", r.key, ErrNotReentrant)
	case len(errs) > n-majority:
		return nil, retry{}, live, fmt.Errorf("%w (%w): %s: %d of %d nodes failed: %w",
			ErrNoQuorum, ErrNotObtained, r.key, len(errs), n, errors.Join(errs...))
	case took >= majority: // the validity ran out while asking: retry now
		return nil, retry{}, live, nil
	case took > 0:
		pause := time.Millisecond + rand.N(min(nodeTimeout(lease), 50*time.Millisecond))
		return nil, retry{wait: pause, split: true}, live, nil
	}
	// A majority is free once enough of the holder's keys expire.
	slices.Sort(pttls)
	need := majority - took
	next := time.Second
	if need >= 1 && need <= len(pttls) {
		next = fallback(pttls[need-1])
	}
	return nil, retry{wait: next}, live, nil
}

// release compare-and-deletes owner's key on every node and publishes the
// release there; it returns how many nodes released it and the errors.
func (r *RedLock) release(ctx context.Context, owner string) error {
	_, err := r.releaseCount(ctx, owner)
	return err
}

func (r *RedLock) releaseCount(ctx context.Context, owner string) (int, error) {
	replies := r.q.each(ctx, nodeTimeout(r.def.Lease), func(ctx context.Context, c *Client) *redis.Cmd {
		return c.eval(ctx, r.def.Scripts.Release, []string{r.key}, owner, r.def.Lease.Milliseconds(), r.channel())
	})
	released := 0
	var errs []error
	for i, cmd := range replies {
		n, err := cmd.Int()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
		case n == 0:
			released++
		}
	}
	return released, errors.Join(errs...)
}

// ForceUnlock deletes the lock on every node whoever holds it, and wakes
// its waiters; the holder's lease is cancelled with ErrLockLost at its
// next renewal. It returns how many nodes held it, and the errors of the
// nodes that did not answer, joined.
func (r *RedLock) ForceUnlock(ctx context.Context) (int, error) {
	replies := r.q.each(ctx, nodeTimeout(r.def.Lease), func(ctx context.Context, c *Client) *redis.Cmd {
		return c.eval(ctx, r.def.Scripts.ForceUnlock, []string{r.key}, r.channel())
	})
	deleted := 0
	var errs []error
	for i, cmd := range replies {
		n, err := cmd.Int()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("lockgen: force-unlocking %s on node %d: %w", r.key, i, err))
		case n == 1:
			deleted++
		}
	}
	return deleted, errors.Join(errs...)
}

// nodeSub is a waiter on one node's release channel.
type nodeSub struct {
	c   *Client
	sub *subscription
	w   *waiter
}

// subscribe subscribes to the lock's channel on the given nodes at once,
// each given nodeTimeout to confirm; nodes that do not are left out (the
// others' messages and the fallback timer still wake the waiter).
func (r *RedLock) subscribe(ctx context.Context, nodes []int) []nodeSub {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		subs []nodeSub
	)
	for _, i := range nodes {
		c := r.q.nodes[i]
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, nodeTimeout(r.def.Lease))
			defer cancel()
			s, err := c.hub.subscribe(sctx, r.channel())
			if err != nil {
				return
			}
			w := c.hub.join(s)
			mu.Lock()
			subs = append(subs, nodeSub{c: c, sub: s, w: w})
			mu.Unlock()
		})
	}
	wg.Wait()
	return subs
}

// each runs call on every node at once and returns their replies in node
// order. A node that has not answered within timeout gets an error reply;
// its call is abandoned (the caller's scripts are safe to repeat or undo).
func (q *Quorum) each(ctx context.Context, timeout time.Duration, call func(ctx context.Context, c *Client) *redis.Cmd) []*redis.Cmd {
	type reply struct {
		i   int
		cmd *redis.Cmd
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make(chan reply, len(q.nodes))
	for i, c := range q.nodes {
		go func() { out <- reply{i, call(ctx, c)} }()
	}
	cmds := make([]*redis.Cmd, len(q.nodes))
	timer := time.NewTimer(timeout)
	defer timer.Stop()
collect:
	for range q.nodes {
		select {
		case r := <-out:
			cmds[r.i] = r.cmd
		case <-timer.C:
			break collect
		}
	}
	for i, cmd := range cmds {
		if cmd == nil {
			cmds[i] = redis.NewCmd(ctx)
			cmds[i].SetErr(fmt.Errorf("no reply within %v", timeout))
		}
	}
	return cmds
}

// RedLockLease is one hold of a RedLock. Its Context is cancelled when the
// hold ends: with cause ErrLockLost when a majority can no longer be
// counted on (renewal found the lock gone or taken on too many nodes, or
// could not renew it on a majority before its validity ran out),
// ErrClosed when a node's client was closed, and context.Canceled after
// Unlock.
type RedLockLease struct {
	r      *RedLock
	owner  string
	ctx    context.Context
	end    context.CancelCauseFunc
	expiry *time.Timer // fires when the validity runs out unrenewed

	mu         sync.Mutex
	validUntil time.Time
	unlocked   bool
}

func (r *RedLock) newLease(parent context.Context, owner string, start time.Time) *RedLockLease {
	le := &RedLockLease{r: r, owner: owner, validUntil: start.Add(r.def.Lease - drift(r.def.Lease))}
	le.ctx, le.end = context.WithCancelCause(context.WithValue(parent, ownerKey{}, owner))
	le.expiry = time.AfterFunc(time.Until(le.validUntil), func() { le.end(ErrLockLost) })
	if r.def.Renew {
		go le.renew()
	}
	return le
}

// Context returns the lease's context: the context given to Lock,
// carrying the owner, cancelled when the hold ends (see RedLockLease).
func (le *RedLockLease) Context() context.Context { return le.ctx }

// ValidUntil returns the local time until which the lock is held on a
// majority of the nodes, as far as this client can tell: the start of the
// last successful acquisition or renewal, plus the lease, minus the
// allowed clock drift.
func (le *RedLockLease) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.validUntil
}

// renew extends the lease on every node every lease/3 while it is held.
// One goroutine per held RedLock (see "RedLock" in the package doc).
func (le *RedLockLease) renew() {
	r := le.r
	lease := r.def.Lease
	interval := lease / 3
	timer := time.NewTimer(interval)
	defer timer.Stop()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(le.ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
	}
	for _, c := range r.q.nodes {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.hub.closedCh())})
	}
	n, majority := len(r.q.nodes), r.q.Majority()
	for {
		switch chosen, _, _ := reflect.Select(cases); {
		case chosen == 0:
			return
		case chosen >= 2:
			le.end(ErrClosed)
			return
		}
		start := time.Now()
		replies := r.q.each(context.Background(), nodeTimeout(lease), func(ctx context.Context, c *Client) *redis.Cmd {
			return c.eval(ctx, r.def.Scripts.Renew, []string{r.key}, lease.Milliseconds(), le.owner)
		})
		renewed, gone := 0, 0
		for _, cmd := range replies {
			switch v, err := cmd.Int(); {
			case err != nil:
			case v == 1:
				renewed++
			default:
				gone++
			}
		}
		until := start.Add(lease - drift(lease))
		switch {
		case renewed >= majority && time.Now().Before(until):
			le.mu.Lock()
			le.validUntil = until
			le.mu.Unlock()
			le.expiry.Reset(time.Until(until))
			timer.Reset(interval)
		case gone > n-majority:
			// Too many nodes answered that the lock is not ours: a
			// majority is lost for good.
			le.end(ErrLockLost)
			return
		default:
			// Nodes unreachable: retry soon; the expiry timer ends the
			// lease if no majority answers within its validity.
			timer.Reset(interval / 4)
		}
	}
}

// Unlock releases the lock on every node (compare-and-delete; the nodes
// that do not answer let it expire after the lease) and wakes waiters.
// It returns ErrNotHeld when the lease was already unlocked or no node
// still held it for this owner, ErrLockLost when the lease was known to
// be lost, or the nodes' errors when none could be reached.
func (le *RedLockLease) Unlock(ctx context.Context) error {
	le.mu.Lock()
	if le.unlocked {
		le.mu.Unlock()
		return ErrNotHeld
	}
	le.unlocked = true
	le.mu.Unlock()
	le.expiry.Stop()
	lost := errors.Is(context.Cause(le.ctx), ErrLockLost)
	le.end(nil)
	released, err := le.r.releaseCount(ctx, le.owner)
	switch {
	case lost:
		return ErrLockLost
	case released > 0:
		return nil
	case err != nil:
		return fmt.Errorf("lockgen: releasing %s: %w", le.r.key, err)
	}
	return ErrNotHeld
}
