package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

func init() {
	impl.NewSemaphore = func(c any, def *impl.SemaphoreDef, key string) any { return c.(*Client).newSemaphore(def, key) }
}

// Semaphore errors. ErrPermitLost also matches ErrLockLost, and
// ErrPermitNotHeld also matches ErrNotHeld, so code that handles locks and
// permits alike can test for either.
var (
	// ErrTooManyPermits: Acquire asked for more permits than the semaphore
	// has, so no wait could ever end with them (unless an operator raises
	// the capacity: WithCapacityWait waits for that instead).
	ErrTooManyPermits = errors.New("lockgen: more permits requested than the semaphore has")

	// ErrPermitLost: a permit was lost while held: its hold was evicted
	// (deleted, or its lease ran out unrenewed). It is the cause of a lost
	// permit's context (context.Cause).
	ErrPermitLost error = &sentinel{"lockgen: permit lost", ErrLockLost}

	// ErrPermitNotHeld: a permit released twice, or released after it was
	// lost; Permit.TTL or Permit.SetLease of a permit released or whose
	// hold no longer exists in Redis.
	ErrPermitNotHeld error = &sentinel{"lockgen: permit not held", ErrNotHeld}

	// ErrNoPermit: the permits asked for were not free for the whole wait.
	// It also matches ErrNotObtained, and the context's error when the
	// context ended the wait.
	ErrNoPermit error = &sentinel{"lockgen: permits not obtained", ErrNotObtained}
)

// sentinel is an error that also matches a more general one.
type sentinel struct {
	msg    string
	parent error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.parent }

// Semaphore returns the semaphore with the given definition (emitted by
// lockgen) and key. It does not contact Redis.
func (c *Client) newSemaphore(def *impl.SemaphoreDef, key string) *Semaphore {
	s := &Semaphore{c: c, def: def, key: key}
	s.rdb.Prepare(&c.conn, def, key, s.registryTTL(), c.classicWake(key))
	return s
}

// Semaphore is one distributed counting semaphore: a generated
// constructor's result, such as semaphores.Export("acme"). It is a small
// value that does not contact Redis until a method is called.
//
// Every Acquire takes its permits as one hold with an id and a lease, so a
// holder that dies without releasing cannot leak permits: they come back
// when its lease runs out. A live holder's lease is renewed by the
// watchdog (spec renew: true, the default).
//
// In Redis the semaphore is a sorted set of holds (the key itself, scored
// by expiry in server time; a single hold of one permit taken while
// nothing was held is compact, key:counts alone, see "Semaphores and
// permits" in docs/design.md), a hash of the permits per hold (key:counts),
// the capacity when an operator set one (key:capacity), and its waiter
// registry (key:queue, key:waiters); waiters are woken on key:ch:<client
// ID>.
type Semaphore struct {
	c   *Client
	def *impl.SemaphoreDef
	key string
	// rdb are its scripts' calls, prepared once per Semaphore (keys and
	// constant arguments boxed), in the same allocation.
	rdb rdb.Semaphore
}

// Key returns the Redis key of the semaphore's holds.
func (s *Semaphore) Key() string { return s.key }

// Name returns the semaphore's name in the spec.
func (s *Semaphore) Name() string { return s.def.Name }

func (s *Semaphore) channel() string { return s.c.wakePrefix(s.key) }

// ops returns s's script operations (runtime/internal/rdb).
func (s *Semaphore) ops() *rdb.Semaphore { return &s.rdb }

// waitChannel is the channel s's waiters on this client wait on: releases
// name the waiters they hand permits to on their client's channel (see
// "Waiter registry" in docs/design.md).
func (s *Semaphore) waitChannel() string { return s.channel() + ":" + s.c.id }

// registryTTL is how long a registered waiter of s keeps its place
// unrefreshed: SemaphoreDef's WaiterTTL, or the client's (see
// Lock.waitTTL).
func (s *Semaphore) registryTTL() time.Duration {
	if s.def.WaiterTTL > 0 {
		return s.def.WaiterTTL
	}
	return s.c.waitRegistryTTL()
}

// Acquire takes n permits as one hold, waiting until that many are free:
// until the context's deadline when it has one, otherwise for the spec's
// default wait. A waiter queues in the semaphore's waiter registry, and
// waiters are served in arrival order: a release hands its permits to
// the waiters at the head of the queue that they satisfy, and a request
// for many is not passed by smaller ones (see "Semaphores and permits" in
// docs/design.md). Waiting costs no Redis traffic but a refresh of the
// registry entry every third of its TTL.
//
// The context bounds the wait, not the hold: the permit's Context keeps
// its values but not its cancellation (unless WithParentCancel), see
// "Lifetimes and deadlines" in the package doc. A context that has ended already takes
// nothing.
//
// It returns ErrTooManyPermits at once when n exceeds the semaphore's
// capacity (unless given WithCapacityWait: then it waits for the capacity
// to grow), ErrInvalidArgument when n < 1 or for a lease option out of
// range, ErrNoPermit (which also matches ErrNotObtained) when the wait ran
// out (also matching the context's error when the context ended it, also
// before or while the permits were being taken: then none stay held),
// ErrClosed after the client was closed, or a Redis error.
func (s *Semaphore) Acquire(ctx context.Context, n int, opts ...AcquireOption) (*Permit, error) {
	o, err := acquireOpts(s.def.Lease, opts)
	if err != nil {
		return nil, err
	}
	return s.acquire(ctx, n, defaultWait(ctx, s.def.Wait), o)
}

// TryAcquire takes n permits, waiting at most wait (0: try once) and no
// longer than the context allows. It returns the errors Acquire returns,
// and ErrInvalidArgument for a negative wait.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration, opts ...AcquireOption) (*Permit, error) {
	if err := checkWait(wait); err != nil {
		return nil, err
	}
	o, err := acquireOpts(s.def.Lease, opts)
	if err != nil {
		return nil, err
	}
	if wait > 0 {
		o.end = time.Now().Add(wait) // its attempts end with the wait too
	}
	return s.acquire(ctx, n, wait, o)
}

// acquire takes n permits; wait < 0 means as long as ctx allows.
func (s *Semaphore) acquire(ctx context.Context, n int, wait time.Duration, o acquireOptions) (p *Permit, err error) {
	ctx, end := s.c.start(ctx, OpAcquire, s.def.Name)
	defer func(t time.Time) { s.c.acquired(ctx, end, s.def.Name, t, err) }(time.Now())
	p, err = s.acquireWait(ctx, n, wait, o)
	return p, noPermit(err)
}

// noPermit turns the ErrNotObtained of a wait into ErrNoPermit, keeping
// what else it matches.
func noPermit(err error) error {
	if err == nil || !errors.Is(err, ErrNotObtained) || errors.Is(err, ErrNoPermit) {
		return err
	}
	if err == ErrNotObtained {
		return ErrNoPermit
	}
	return &noPermitError{err}
}

// heldByOthers returns a wait's settled check (waitObject, settledBy)
// for the waiter r of n permits: true when the permits held leave fewer
// than n free of the capacity, n being within it. One HMGET of the
// counts' total and their cache of the capacity key ("c": what the
// contended scripts last read there, 0 for none, which every capacity
// change drops; "e" for a capacity that expires, read every time by the
// scripts); with no usable cache the wait tries. The total counts holds
// whose lease ran out until a script evicts them: the waiter's refresh,
// due when the earliest hold runs out, does.
func (s *Semaphore) heldByOthers(n int, r *registration) func(ctx context.Context) bool {
	return s.c.settledBy(r, func(ctx context.Context, p redis.Pipeliner) func() bool {
		counts := p.HMGet(ctx, r.reg.Single, "*", "c")
		return func() bool {
			v := counts.Val()
			if counts.Err() != nil || len(v) != 2 {
				return false
			}
			held, _ := v[0].(string)
			cached, _ := v[1].(string)
			used, err := strconv.Atoi(held)
			if err != nil {
				return false
			}
			capacity, err := strconv.Atoi(cached)
			if err != nil {
				return false
			}
			if capacity == 0 {
				capacity = s.def.Permits
			}
			// (A request above the capacity tries: the capacity fell
			// below it, and the waiter may have missed the message
			// that says so.)
			return n <= capacity && used+n > capacity
		}
	})
}

// noPermitError is a failed wait for permits: it matches ErrNoPermit and
// whatever the wait's error matches.
type noPermitError struct{ err error }

func (e *noPermitError) Error() string {
	return ErrNoPermit.Error() + strings.TrimPrefix(e.err.Error(), ErrNotObtained.Error())
}
func (e *noPermitError) Unwrap() []error { return []error{ErrNoPermit, e.err} }

func (s *Semaphore) acquireWait(ctx context.Context, n int, wait time.Duration, o acquireOptions) (p *Permit, err error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d permits", ErrInvalidArgument, n)
	}
	owner := s.c.newOwner()
	reg := time.Duration(0) // no registry entry for a try that does not wait
	if wait != 0 {
		reg = s.registryTTL()
	}
	var trust handoffTrust
	trust.sending()
	first := "0"
	if s.c.contended.recently(s.key) {
		first = "3" // skip the uncontended check (see contention)
	}
	p, next, err := s.attempt(ctx, owner, strconv.Itoa(n), o, reg, first)
	if p != nil || failFast(err, wait) {
		if err != nil && (rdb.IsConnError(err) || errors.Is(err, context.Canceled)) {
			s.leave(ctx, owner, n) // see Lock.acquire
		}
		return p, err
	}
	if wait == 0 {
		return nil, ErrNotObtained
	}
	ops := s.ops()
	k := ops.Keys()
	obj := waitObject{name: s.def.Name, key: s.key, reg: &registration{
		reg: rdb.Registry{Hold: k[0], Queue: k[3], Waiters: k[4], Deadlines: true, Single: k[1], Watch: "P"}, ttl: reg, member: owner + " " + strconv.Itoa(n), pttl: next,
		short: s.def.Lease <= 2*HandoffLease, fixed: !s.def.Renew}, tried: trust.sent}
	obj.settled = s.heldByOthers(n, obj.reg)
	sleep := s.c.waitSleep(obj.reg)
	err = s.c.waitFor(ctx, wait, obj, s.waitChannel(), owner, true, sleep, func(msg string) (bool, time.Duration, error) {
		var err error
		if rest, ok := strings.CutPrefix(msg, owner); ok && (s.def.Renew || o.lease <= HandoffLease) {
			// A release handed this waiter its permits, with the hand-off
			// lease: the watchdog's first renewal (or a lease that fits
			// in it) makes them this waiter's without another call; a
			// late or suspect message is confirmed by the attempt.
			if rest, ms := handoffTime(rest); rest == "" {
				if start, fresh := trust.start(s.c, s.key, ms, o.lease); fresh {
					p, err = s.newPermit(ctx, owner, n, o, start, HandoffLease)
					if p != nil {
						s.c.contended.saw(s.key)
					}
					return p != nil, 0, err
				}
			}
		}
		prev := trust.sending()
		// A wake-up without permits ("<owner> retry": the capacity
		// changed) makes the full attempt; the fallback timer's, while a
		// hold is left, only refreshes the entry.
		registered := "2"
		if msg != "" {
			registered = "1"
		}
		p, _, err = s.attempt(ctx, owner, strconv.Itoa(n), o, reg, registered)
		trust.replied(prev)
		return p != nil, sleep, err
	})
	if err != nil {
		if p == nil {
			s.leave(ctx, owner, n)
		}
		return nil, err
	}
	return p, nil
}

// leave takes owner, a waiter for n permits that gives up, out of s's
// registry; permits a release handed to it meanwhile are handed on. It is
// best effort: an entry left behind is passed over after its deadline.
// The caller waits for it at most cleanUpWait (see cleanUp).
func (s *Semaphore) leave(ctx context.Context, owner string, n int) {
	cleanUp(ctx, func(ctx context.Context) {
		_ = s.ops().Release(ctx, owner, n).Err()
	})
}

// attempt runs the acquire script once for n permits ("*": every free
// one), registering owner as a waiter for reg when they are not free (0:
// not). registered is the script's flag: "0" for a first attempt,
// "1" for a full attempt of a registered owner, "2" for its refresh:
// while a live hold is left and no registered waiter is dead, the script
// only refreshes owner's entry (see semaphore_acquire). It returns a
// permit when taken, or how long to wait at most before trying again
// (until the earliest hold expires). Like a lock's attempt, it takes
// nothing when ctx has ended, and gives back what it took when ctx ended
// meanwhile.
func (s *Semaphore) attempt(ctx context.Context, owner, n string, o acquireOptions, reg time.Duration, registered string) (*Permit, time.Duration, error) {
	if err := s.c.checkOpen(); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, waitError(ctx, err)
	}
	start := time.Now()
	// Not cut short by ctx's cancellation, like a lock's attempt: permits
	// granted to an abandoned reply would stay taken for a whole lease;
	// cut short by its deadline, or without a reply after go-redis'
	// retries, the owner leaves (giving back what the script may have
	// granted) in the background.
	uctx, cancel := attemptContext(ctx, true, o.end)
	defer cancel()
	a := rdb.SemAttempt{Owner: owner, N: n, Lease: o.lease, Reg: reg, Registered: registered, WaitCapacity: o.waitCapacity}
	var cmd *redis.Cmd
	if _, bounded := uctx.Deadline(); bounded {
		// (The closure and what it captures are made here only: an
		// unbounded attempt allocates neither.)
		bctx, ba := uctx, a
		var ok bool
		if cmd, ok = within(bctx, func() *redis.Cmd { return s.ops().Acquire(bctx, ba) }); !ok { // see Lock.attempt
			cmd = lateCmd(bctx)
		}
	} else {
		cmd = s.ops().Acquire(uctx, a)
	}
	var buf [3]int64
	res, fast, err := rdb.SemAcquireReply(cmd, &buf) // semaphore_acquire reply: int | {int, int, int} | {int, int}
	if err != nil {
		return nil, 0, attemptError(s.key, err)
	}
	switch {
	case len(res) == 3 && res[0] == 1:
		p, err := s.newPermit(ctx, owner, int(res[2]), o, start, 0)
		if err != nil {
			return nil, 0, err
		}
		p.fast = fast
		if err := ctx.Err(); err != nil {
			// Cancelled while the script ran: give the permits back.
			_ = p.Release(ctx)
			return nil, 0, waitError(ctx, err)
		}
		return p, 0, nil
	case len(res) == 2 && res[0] == -1:
		return nil, 0, fmt.Errorf("%w: %s requested, %s has %d", ErrTooManyPermits, n, s.key, res[1])
	case len(res) == 3 && res[0] == 0:
		s.c.contended.saw(s.key)
		next := time.Duration(res[2]) * time.Millisecond
		if res[2] < 0 { // no holds, yet too few free: capacity changing
			next = time.Second
		}
		return nil, next, nil
	}
	return nil, 0, fmt.Errorf("lockgen: acquiring %s: unexpected reply %v", s.key, slices.Clone(res)) // (a copy: buf stays on the stack)
}

// Available returns how many permits are free now (0 when an operator
// lowered the capacity below what is held), or a Redis error. Holds whose
// lease ran out are evicted first.
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	capacity, held, err := s.state(ctx)
	return max(0, capacity-held), err
}

// Capacity returns how many permits the semaphore has: the spec's
// permits, or what an operator set with SetPermits or AddPermits. It
// returns a Redis error when Redis fails.
func (s *Semaphore) Capacity(ctx context.Context) (int, error) {
	capacity, _, err := s.state(ctx)
	return capacity, err
}

func (s *Semaphore) state(ctx context.Context) (capacity, held int, err error) {
	res, err := readValue(ctx, func() ([]int64, error) {
		return s.ops().State(ctx).Int64Slice()
	})
	if err != nil {
		return 0, 0, fmt.Errorf("lockgen: reading %s: %w", s.key, err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("lockgen: reading %s: unexpected reply %v", s.key, res)
	}
	return int(res[0]), int(res[1]), nil
}

// SetPermits sets the semaphore's capacity to n, for operators; it stays
// until changed again or ResetPermits, also across restarts and spec
// changes, or, with WithCapacityTTL(d), for d (then the spec's permits
// apply again: Redisson's expire on a semaphore). Lowering it below what
// is held takes nothing back: new holders wait until enough is released.
// Waiters that the free permits now satisfy get them, in arrival order;
// waiters asking more than n fail with ErrTooManyPermits (unless they
// wait for the capacity to grow). It returns ErrInvalidArgument when n <
// 1 or the TTL is under a millisecond, or a Redis error.
func (s *Semaphore) SetPermits(ctx context.Context, n int, opts ...CapacityOption) error {
	if n < 1 {
		return fmt.Errorf("%w: capacity %d", ErrInvalidArgument, n)
	}
	_, err := s.setCapacity(ctx, "set", n, opts)
	return err
}

// AddPermits changes the semaphore's capacity by delta (which may be
// negative) and returns the new capacity; see SetPermits. A capacity set
// with a TTL keeps it, unless WithCapacityTTL gives another. It returns
// ErrInvalidArgument, changing nothing, when the capacity would fall below
// 1, or a Redis error.
func (s *Semaphore) AddPermits(ctx context.Context, delta int, opts ...CapacityOption) (int, error) {
	return s.setCapacity(ctx, "add", delta, opts)
}

// CapacityOption configures SetPermits, TrySetPermits and AddPermits.
type CapacityOption func(*capacityOptions)

type capacityOptions struct{ ttl time.Duration }

// WithCapacityTTL makes the capacity set last d (at least a millisecond):
// after it the spec's permits apply again (Redisson's trySetPermits(n,
// ttl), or expire on a semaphore). When it ends the capacity shrinks or
// grows without a call: holds above a smaller capacity keep their
// permits until released; waiters that a larger capacity satisfies get
// their permits at the next release (or their next attempt), not at once.
func WithCapacityTTL(d time.Duration) CapacityOption {
	return func(o *capacityOptions) { o.ttl = d }
}

// ResetPermits forgets a capacity set by SetPermits or AddPermits, so that
// the spec's permits apply again, and wakes waiters as SetPermits does. It returns a
// Redis error when Redis fails.
func (s *Semaphore) ResetPermits(ctx context.Context) error {
	_, err := s.setCapacity(ctx, "reset", 0, nil)
	return err
}

func (s *Semaphore) setCapacity(ctx context.Context, mode string, v int, opts []CapacityOption) (int, error) {
	res, err := s.capacityScript(ctx, mode, v, opts)
	if err != nil {
		return 0, err
	}
	return int(res[1]), nil
}

// capacityScript runs the capacity script; its reply is {1, capacity}, or
// {0, capacity} when tryset found one set.
func (s *Semaphore) capacityScript(ctx context.Context, mode string, v int, opts []CapacityOption) ([]int64, error) {
	var o capacityOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(opts) > 0 && o.ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: a capacity TTL of %v (at least 1ms)", ErrInvalidArgument, o.ttl)
	}
	op := s.c.newSharedOp() // the same in every send (see resolve)
	send := func() *redis.Cmd {
		return s.ops().SetCapacity(ctx, mode, v, op, o.ttl)
	}
	cmd := send()
	if rdb.IsConnError(cmd.Err()) && ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
		defer cancel()
		cmd = resolve(rctx, cmd, send)
	}
	res, err := cmd.Int64Slice()
	switch {
	case err != nil:
		return nil, fmt.Errorf("lockgen: setting the capacity of %s: %w", s.key, err)
	case len(res) != 2:
		return nil, fmt.Errorf("lockgen: setting the capacity of %s: unexpected reply %v", s.key, res)
	case res[0] < 0:
		return nil, fmt.Errorf("%w: the capacity of %s would be %d", ErrInvalidArgument, s.key, res[1])
	}
	return res, nil
}

// Permit is one hold of a semaphore's permits, returned by Acquire and
// TryAcquire. Its Context is cancelled the moment the hold ends: with
// cause ErrPermitLost when the permits were lost (evicted, or not
// renewable before the lease ran out), ErrClosed when the client was
// closed, and context.Canceled after Release. Do the guarded work under
// Context() so a lost permit stops it.
type Permit struct {
	hold
	sem   *Semaphore
	owner string
	n     int
	taken time.Time
	fast  bool // taken by the acquire's fast path (see Semaphore.release)
}

// newPermit makes the permit of owner's hold of n permits of s, taken at
// start, and registers it with the watchdog when s is renewed; first is
// a shorter lease the hold has in Redis until its first renewal (a
// hand-off), 0 for o's. When that fails (the client was closed meanwhile)
// it gives the permits back and returns the error.
func (s *Semaphore) newPermit(parent context.Context, owner string, n int, o acquireOptions, start time.Time, first time.Duration) (*Permit, error) {
	p := &Permit{sem: s, owner: owner, n: n, taken: start}
	so := o
	if first > 0 && first < o.lease {
		so.lease = first
	}
	p.start(parent, so, start, s.def.Renew, ErrPermitLost)
	p.lease = o.lease
	if !s.def.Renew {
		return p, nil
	}
	// Its ARGV made at its first renewal, if one comes (an uncontended
	// Acquire+Release builds none).
	r := s.renewal(owner, o.lease, false)
	r.ArgsOf = (*permitHold)(p)
	r.First = first
	if err := s.c.wd.Add(p.held(), r, (*permitHold)(p), start); err != nil {
		p.abandon(err)
		// Nobody will renew or release it: give it back now.
		_, _ = s.release(parent, owner, false)
		return nil, err
	}
	return p, nil
}

// release runs the release script for owner's hold, under a release
// context (see ReleaseTimeout); it returns the script's code.
// A release whose hold is gone after the call was sent more than once
// (a reply lost) released it: it reports n = 0 then (see rdb.SendCounter).
func (s *Semaphore) release(ctx context.Context, owner string, fast bool) (int, error) {
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	arg := rdb.NewCounted(owner)
	n, err := rdb.HandOnDue, error(nil)
	if fast {
		// A hold the acquire's fast path took: first with the keys a
		// release reads while nobody waits (rdb.Semaphore.ReleaseFast),
		// whole when waiters may be due permits.
		fast := func() *redis.Cmd { return s.ops().ReleaseFast(ctx, arg) }
		n, err = resolve(ctx, fast(), fast).Int()
		if err == nil && n == rdb.HandOnDue {
			rdb.HandedOn(arg)
		}
	}
	if err == nil && n == rdb.HandOnDue {
		send := func() *redis.Cmd { return s.ops().Release(ctx, arg, 0) }
		n, err = resolve(ctx, send(), send).Int()
	}
	if n < 0 && rdb.Resent(arg) {
		n = 0
	}
	return n, err
}

// renewal says how the watchdog renews owner's hold of s with lease;
// with args, it carries the renewal's ARGV (else its ArgsOf makes them
// when the first renewal comes).
func (s *Semaphore) renewal(owner string, lease time.Duration, args bool) watchdog.Renewal {
	r := watchdog.Renewal{
		Object: s.def.Name,
		Script: s.def.Scripts.Renew,
		Keys:   s.ops().Keys()[:2],
		Lease:  lease,
	}
	if args {
		r.Args = []any{lease.Milliseconds(), owner}
	}
	return r
}

// held identifies the permit's hold for the watchdog.
func (p *Permit) held() watchdog.Key { return watchdog.Key{Key: p.sem.key, Owner: p.owner} }

// cancel ends the permit's context; the watchdog calls it, with
// ErrLockLost when the hold is gone.
func (p *Permit) cancel(cause error) {
	if cause == ErrLockLost {
		cause = ErrPermitLost
	}
	p.hold.cancel(cause)
}

// Context returns the permit's context: it carries the values of the
// context given to Acquire, and ends when the hold ends (see Permit), not
// when the context given to Acquire does, unless Acquire was given
// WithParentCancel. Like a lease's, its Err and Done consult the local
// lease deadline when called.
func (p *Permit) Context() context.Context {
	if p == nil {
		return endedContext(ErrPermitNotHeld)
	}
	return p.ctx
}

// Permits returns how many permits this hold has.
func (p *Permit) Permits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// AcquireEach acquires n permits as Acquire does, as n permits of one
// each, each released (renewed, lost) alone: Redisson's acquire(n), which
// returns n permit ids. It is Acquire followed by Split (one more round
// trip when n > 1), and returns the errors of both; when the split fails
// the permits are released, and nothing is held.
func (s *Semaphore) AcquireEach(ctx context.Context, n int, opts ...AcquireOption) ([]*Permit, error) {
	p, err := s.Acquire(ctx, n, opts...)
	if err != nil {
		return nil, err
	}
	ps, err := p.Split(ctx)
	if err != nil {
		_ = p.Release(ctx)
		return nil, err
	}
	return ps, nil
}

// Split turns the permit, one hold of Permits() permits, into that many
// permits of one each, with its lease left: p itself, now of one permit,
// and Permits()-1 new ones, each released, renewed and lost alone. A
// permit of one returns []*Permit{p} without a round trip. Otherwise it
// is one round trip (semaphore_split: safe to run twice) and returns
// ErrPermitNotHeld when p was released or its hold no longer exists in
// Redis, ErrPermitLost when p's context has ended, ErrClosed, or a Redis
// error (then p may hold one permit in Redis, and the others come back at
// the end of its lease).
func (p *Permit) Split(ctx context.Context) ([]*Permit, error) {
	if p == nil || p.given() {
		return nil, ErrPermitNotHeld
	}
	if p.ctx.Err() != nil {
		return nil, ErrPermitLost
	}
	n := p.Permits()
	if n == 1 {
		return []*Permit{p}, nil
	}
	s := p.sem
	if err := s.c.checkOpen(); err != nil {
		return nil, err
	}
	owners := make([]string, n-1)
	for i := range owners {
		owners[i] = s.c.newOwner()
	}
	sent := time.Now()
	deadline, _ := p.ctx.Deadline()
	// semaphore_split reply: int
	code, err := s.ops().Split(ctx, p.owner, owners).Int()
	switch {
	case err != nil:
		cleanUp(ctx, func(ctx context.Context) { // a split that ran: its new holds go back
			for _, o := range owners {
				_, _ = s.release(ctx, o, false)
			}
		})
		return nil, fmt.Errorf("lockgen: splitting a permit of %s: %w", s.key, err)
	case code == 0:
		return nil, fmt.Errorf("%w: %s holds nothing for %s", ErrPermitNotHeld, s.key, p.owner)
	case code < 0:
		return nil, fmt.Errorf("lockgen: splitting a permit of %s: Redis holds another count than %d for %s", s.key, n, p.owner)
	}
	p.mu.Lock()
	p.n = 1
	p.mu.Unlock()
	ps := []*Permit{p}
	o := acquireOptions{lease: p.lease, parentCancel: p.ctx.parentCancel}
	for _, owner := range owners {
		// Its hold has p's expiry in Redis, which p's local deadline,
		// taken before, does not pass: the same deadline, from the send.
		np, err := s.newPermit(p.ctx.parent, owner, 1, o, sent, max(deadline.Sub(sent), time.Millisecond))
		if err != nil {
			return ps, err // ErrClosed: the client closed meanwhile (the rest expire)
		}
		ps = append(ps, np)
	}
	return ps, nil
}

// Semaphore returns the semaphore the permit belongs to.
func (p *Permit) Semaphore() *Semaphore { return p.sem }

// Release gives the permits back and wakes waiters. It completes although
// ctx was cancelled: it keeps ctx's values only, and gives up after
// ReleaseTimeout. It returns ErrPermitLost when the permit was known to be
// lost (the hold is released all the same if Redis still has it),
// ErrPermitNotHeld when this permit was already released or its hold no
// longer exists (it is Redisson's releaseIfExists too: nothing else is
// released), or ErrNotReleased wrapping the Redis error when Redis
// could not be reached: the hold is no longer renewed then, and the
// permits come back at the end of its lease.
func (p *Permit) Release(ctx context.Context) error {
	if p == nil { // a failed TryAcquire's
		return ErrPermitNotHeld
	}
	lost, ok := p.giveUp()
	if !ok {
		return ErrPermitNotHeld
	}
	s := p.sem
	if s.def.Renew {
		s.c.wd.Remove(p.held(), (*permitHold)(p))
	}
	n, err := s.release(ctx, p.owner, p.fast)
	s.c.observe(ctx, Event{Kind: EventReleased, Object: s.def.Name, Duration: time.Since(p.taken)})
	s.c.releaseFoundNothing(n, err, lost)
	return releaseResult(s.key, lost || (n < 0 && err == nil && p.ranOut()), n, err, ErrPermitLost, ErrPermitNotHeld)
}

// TTL returns how long the permit's hold has left of its lease in Redis,
// on the server's clock (Redisson's getLeaseTime, for the permit's hold):
// up to the lease, and renewed every third of it when the spec renews; 0
// when the lease ran out and nobody evicted the hold yet. It is one round
// trip (a read-only script) and returns ErrPermitNotHeld when the permit
// was released or its hold no longer exists in Redis (its lease ran out
// and it was evicted), ErrClosed, or a Redis error.
func (p *Permit) TTL(ctx context.Context) (time.Duration, error) {
	if p == nil {
		return 0, ErrPermitNotHeld
	}
	if p.given() {
		return 0, ErrPermitNotHeld
	}
	s := p.sem
	if err := s.c.checkOpen(); err != nil {
		return 0, err
	}
	// semaphore_lease reply: int
	ms, err := readValue(ctx, func() (int64, error) { return s.ops().Lease(ctx, p.owner).Int64() })
	switch {
	case err != nil:
		return 0, fmt.Errorf("lockgen: reading the lease of a permit of %s: %w", s.key, err)
	case ms < 0:
		return 0, fmt.Errorf("%w: %s holds nothing for %s", ErrPermitNotHeld, s.key, p.owner)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// SetLease makes the permit's hold last d from now in Redis, shorter or
// longer than its lease was (Redisson's updateLeaseTime), and moves its
// context's deadline with it. When the spec renews the semaphore, the
// watchdog renews the hold with d from then on, every third of d (a
// renewal with the old lease still in flight when SetLease runs never
// shortens the new one: renewals only extend a hold; one with a longer
// old lease may extend it once more). When it does not, the hold ends d from now unless
// released or set again. It is one round trip (semaphore_renew in its
// set mode) and returns ErrInvalidArgument for d under a
// millisecond, ErrPermitNotHeld when the permit was released or its hold
// no longer exists in Redis (its lease ran out and it was evicted: the
// permit stays lost, SetLease does not take it again), ErrPermitLost
// when the permit's context had ended with its old lease before the reply
// came, ErrClosed, or a Redis error.
func (p *Permit) SetLease(ctx context.Context, d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("%w: a lease of %v (at least 1ms)", ErrInvalidArgument, d)
	}
	if p == nil || p.given() {
		return ErrPermitNotHeld
	}
	s := p.sem
	if err := s.c.checkOpen(); err != nil {
		return err
	}
	sent := time.Now()
	// semaphore_renew reply: int
	n, err := s.ops().SetLease(ctx, p.owner, d).Int()
	switch {
	case err != nil:
		return fmt.Errorf("lockgen: setting the lease of a permit of %s: %w", s.key, err)
	case n == 0:
		return fmt.Errorf("%w: %s holds nothing for %s", ErrPermitNotHeld, s.key, p.owner)
	}
	if !p.ctx.reset(sent.Add(d)) {
		if p.given() {
			return ErrPermitNotHeld // released meanwhile
		}
		return ErrPermitLost // its context ended (its old deadline passed) before the reply
	}
	if !s.def.Renew {
		return nil
	}
	// Renewed with d from now on: a new watchdog entry (a renewal of the
	// old one in flight finds it gone and does nothing).
	s.c.wd.Remove(p.held(), (*permitHold)(p))
	if err := s.c.wd.Add(p.held(), s.renewal(p.owner, d, true), (*permitHold)(p), sent); err != nil {
		return err // ErrClosed: Close ended the permit's context
	}
	if p.given() { // released meanwhile: its Release may have missed the entry
		s.c.wd.Remove(p.held(), (*permitHold)(p))
	}
	return nil
}

// given reports whether the permit was given up (released).
func (p *Permit) given() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gone
}

// Drain takes every permit free now as one hold and returns it: its
// Permits is how many were free (Redisson's drainPermits). It does not
// wait, and takes them even while waiters are queued (they get permits
// again once the drained ones are released). The drained permits come
// back with the permit's Release, or at the end of its lease when it is
// neither renewed nor released, like any permit's. It returns ErrNoPermit
// (which also matches ErrNotObtained) when no permit is free,
// ErrInvalidArgument for a lease option out of range, ErrClosed after the
// client was closed, or a Redis error.
func (s *Semaphore) Drain(ctx context.Context, opts ...AcquireOption) (p *Permit, err error) {
	o, err := acquireOpts(s.def.Lease, opts)
	if err != nil {
		return nil, err
	}
	ctx, end := s.c.start(ctx, OpAcquire, s.def.Name)
	defer func(t time.Time) { s.c.acquired(ctx, end, s.def.Name, t, err) }(time.Now())
	owner := s.c.newOwner()
	p, _, err = s.attempt(ctx, owner, "*", o, 0, "0")
	if err != nil && (rdb.IsConnError(err) || errors.Is(err, context.Canceled)) {
		s.leave(ctx, owner, 0) // see Lock.acquire
	}
	if p == nil && err == nil {
		err = ErrNotObtained
	}
	return p, noPermit(err)
}

// TrySetPermits sets the semaphore's capacity to n unless one is set
// already (by SetPermits, AddPermits or an earlier TrySetPermits), and
// reports whether it did; see SetPermits for what a new capacity does to
// waiters. The spec's permits, which apply while none is set, do not
// count as set. With WithCapacityTTL(d) the capacity lasts d (Redisson's
// trySetPermits(n, ttl)). It returns ErrInvalidArgument when n < 1 or the
// TTL is under a millisecond, or a Redis error.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int, opts ...CapacityOption) (bool, error) {
	if n < 1 {
		return false, fmt.Errorf("%w: capacity %d", ErrInvalidArgument, n)
	}
	res, err := s.capacityScript(ctx, "tryset", n, opts)
	return err == nil && res[0] == 1, err
}

// Acquired returns how many permits are held now (holds whose lease ran
// out are evicted first), or a Redis error.
func (s *Semaphore) Acquired(ctx context.Context) (int, error) {
	_, held, err := s.state(ctx)
	return held, err
}
