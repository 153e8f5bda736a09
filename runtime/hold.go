package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// What every hold (a lock's lease, a semaphore's permits) shares: the
// per-call options of the acquire, the hold's context and its local
// deadline, giving the hold up once, and the release context. See
// "Lifetimes and deadlines" in the package doc.

// ReleaseTimeout bounds every release: Unlock, a permit's Release, a
// delivery's Ack and Nack, a latch's CountDown, and a fair-lock waiter
// leaving its queue. They run under the caller's context's values but not
// its cancellation or deadline, so that a release completes although the
// caller's context was cancelled (defer lease.Unlock(ctx) with a request
// context), and give up after ReleaseTimeout (up to 50 ms more, see
// releaseContext) when Redis cannot be reached.
const ReleaseTimeout = 5 * time.Second

// releaseContext returns the context a release runs under: ctx's values,
// neither its cancellation nor its deadline, and a deadline ReleaseTimeout
// (up to releaseSlot more) away. It is context.WithTimeout(
// context.WithoutCancel(ctx), ReleaseTimeout) in one allocation instead of
// five (a release runs on every Unlock): the releases that start within
// one releaseSlot share a deadline, its Done channel and its timer.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return new(releaseCtx).of(ctx), func() {}
}

// of makes c the release context of ctx, as releaseContext would, and
// returns it: a hold that is released once keeps room for it, saving the
// release an allocation.
func (c *releaseCtx) of(ctx context.Context) context.Context {
	*c = releaseCtx{values: ctx, slot: currentReleaseSlot()}
	return c
}

// releaseSlot is how close together releases must start to share their
// deadline: their timeout is ReleaseTimeout plus at most this.
const releaseSlot = 50 * time.Millisecond

// releaseDeadline is the deadline, its Done channel and its timer that
// the releases starting within one releaseSlot share.
type releaseDeadline struct {
	at   time.Time
	done chan struct{} // closed at at
}

var releaseSlots struct {
	sync.Mutex
	cur *releaseDeadline
}

// currentReleaseSlot returns the shared deadline of a release starting
// now: between ReleaseTimeout and ReleaseTimeout+releaseSlot away.
func currentReleaseSlot() *releaseDeadline {
	now := time.Now()
	releaseSlots.Lock()
	defer releaseSlots.Unlock()
	if d := releaseSlots.cur; d != nil && d.at.Sub(now) >= ReleaseTimeout {
		return d
	}
	d := &releaseDeadline{at: now.Add(ReleaseTimeout + releaseSlot), done: make(chan struct{})}
	time.AfterFunc(ReleaseTimeout+releaseSlot, func() { close(d.done) })
	releaseSlots.cur = d
	return d
}

// releaseCtx is the context of a release: see releaseContext.
type releaseCtx struct {
	values context.Context // the caller's: its values only
	slot   *releaseDeadline
}

func (c *releaseCtx) Deadline() (time.Time, bool) { return c.slot.at, true }
func (c *releaseCtx) Done() <-chan struct{}       { return c.slot.done }

// Value returns the caller's value of key, except the key context.Cause
// asks for (as context.WithoutCancel does): the caller's cancellation is
// not the release's.
func (c *releaseCtx) Value(key any) any {
	if key == causeKey {
		return nil
	}
	return c.values.Value(key)
}

// causeKey is the key context.Cause looks its cancel context up with (the
// context package's own, unexported): found by asking a context that
// records it.
var causeKey = func() any {
	var p keyProbe
	_ = context.Cause(&p)
	return p.key
}()

// keyProbe is a context that records the key of its first Value call.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}

func (p *keyProbe) Err() error { return nil }

// Err returns context.DeadlineExceeded once the deadline passed.
func (c *releaseCtx) Err() error {
	select {
	case <-c.slot.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *releaseCtx) String() string { return "lockgen.releaseContext" }

// notReleased wraps the error of a release that did not reach Redis: the
// hold is no longer renewed, so it expires at the end of its lease.
func notReleased(key string, err error) error {
	return fmt.Errorf("lockgen: releasing %s: %w: %w", key, ErrNotReleased, err)
}

// releaseResult is the error of a hold's release (Lease.Unlock,
// Permit.Release) from what the release script did: lostErr when the hold
// was known to be lost (it was released all the same if Redis still had
// it), ErrNotReleased wrapping err when Redis could not be reached, and
// notHeld when the script found no hold (n < 0).
func releaseResult(key string, lost bool, n int, err, lostErr, notHeld error) error {
	switch {
	case lost:
		return lostErr
	case err != nil:
		return notReleased(key, err)
	case n < 0:
		return notHeld
	}
	return nil
}

// AcquireOption changes one acquire: Lock and TryLock of every lock kind
// (also of a MultiLock and a RedLock), Acquire and TryAcquire of a
// semaphore.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	lease        time.Duration // 0: the spec's
	parentCancel bool
	// fresh: the owner was made for this acquire (ctx carried none), so
	// any hold it has already comes from an earlier run of this acquire's
	// script whose reply was lost (see Lock.attempt).
	fresh bool
	// waitCapacity: a semaphore acquire of more permits than the
	// capacity waits for it to grow (WithCapacityWait).
	waitCapacity bool
	// end: when a TryLock's or TryAcquire's wait ends (zero: no wait
	// given), which bounds its attempts (see attemptContext).
	end time.Time
	// op: a re-entry's operation id, the same in each of its attempts
	// (see "Exactly one effect" in the package doc).
	op string
}

// WithLease sets the lease of this hold instead of the spec's: the TTL of
// the hold in Redis, renewed every third of it when the spec renews (a
// re-entry's lease applies to the hold from then on, but the watchdog
// keeps renewing it with the first hold's). A lease of 0 or less makes the
// acquire fail with ErrInvalidArgument.
func WithLease(d time.Duration) AcquireOption {
	return func(o *acquireOptions) {
		if d <= 0 {
			d = -1
		}
		o.lease = d
	}
}

// WithCapacityWait makes a semaphore's Acquire or TryAcquire of more
// permits than the semaphore's capacity wait, within its wait, until an
// operator's SetPermits, AddPermits or TrySetPermits raises the capacity
// to n and n permits are free, instead of failing at once with
// ErrTooManyPermits (the default). Such a waiter does not hold back the
// waiters behind it while the capacity is too small; when its wait runs
// out it fails with ErrNoPermit, like any wait. Lock acquires ignore it.
func WithCapacityWait() AcquireOption {
	return func(o *acquireOptions) { o.waitCapacity = true }
}

// WithParentCancel makes the hold's context end also when the context
// given to the acquire ends (with its cause), as well as on loss, release
// and Close. Without it, the context given to the acquire bounds the wait
// only (see "Lifetimes and deadlines" in the package doc). Ending the hold's context
// this way does not release the hold: Unlock (Release) still does.
func WithParentCancel() AcquireOption {
	return func(o *acquireOptions) { o.parentCancel = true }
}

// acquireOpts applies opts over the spec's lease.
func acquireOpts(spec time.Duration, opts []AcquireOption) (acquireOptions, error) {
	if len(opts) == 0 { // o does not escape to an option: no allocation
		return acquireOptions{lease: spec}, nil
	}
	var o acquireOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.lease < 0:
		return o, fmt.Errorf("%w: a lease must be positive", ErrInvalidArgument)
	case o.lease == 0:
		o.lease = spec
	}
	return o, nil
}

// monoBase is the origin of the monotonic clock readings deadlines are
// kept in.
var monoBase = time.Now()

// mono returns t on the monotonic clock, as a duration since monoBase.
func mono(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// holdContext is the context of a hold. Its Err, Done and Value consult
// the monotonic clock when they are called: past the hold's local
// deadline (its start, or its last renewal's, plus its lease) the context
// is cancelled there and then, with cause, so that a process that was
// paused past its lease sees an ended context before any timer had the
// chance to run. The deadline moves forward with each renewal (extend).
//
// It costs no allocation of its own (it lives in its Lease or Permit)
// until something needs a cancel-cause context under it: Done, a Value
// other than the owner (context.Cause finds the cause through Value, and
// context.AfterFunc and derived contexts find their parent so), or a
// parent whose cancellation ends it (WithParentCancel). Until then Err
// and the end of the hold are kept in its own fields; the inner context,
// once made, is ended at once with the cause it ended with.
type holdContext struct {
	parent context.Context // the acquire's context: values (and cancellation with parentCancel)
	owner  string          // the Value of ownerKey{} when hasOwner
	cause  error           // the cause of running out: ErrLockLost or ErrPermitLost
	until  atomic.Int64    // the local deadline (mono)
	timer  *time.Timer     // see expires

	mu       sync.Mutex
	inner    context.Context // a cancel-cause context under parent, made on first need
	endInner context.CancelCauseFunc
	endCause error // with this cause (nil: context.Canceled)

	// The flags, together (a Lease is allocated in every Lock: see
	// TestLeaseSize).
	hasOwner bool
	// parentCancel: the parent's cancellation ends the hold
	// (WithParentCancel); the inner context is made at once then.
	parentCancel bool
	// expires: nothing renews the hold, so a timer ends the context at
	// its deadline; it is made with the inner context (before that, Err
	// reads the deadline and nobody can wait on Done), and stopped when
	// the context ends.
	expires   bool
	ended     bool // ended before inner was made (under mu)
	endedFast atomic.Bool
}

func newHoldContext(parent context.Context, parentCancel bool, until time.Time, cause error) *holdContext {
	c := &holdContext{}
	c.init(parent, parentCancel, until, cause)
	return c
}

// init sets c up over parent (c is new).
func (c *holdContext) init(parent context.Context, parentCancel bool, until time.Time, cause error) {
	c.parent, c.cause, c.parentCancel = parent, cause, parentCancel
	c.until.Store(mono(until))
	if parentCancel {
		c.made()
	}
}

// withOwner makes c carry owner as the Value of ownerKey{}, as
// context.WithValue(parent, ownerKey{}, owner) would.
func (c *holdContext) withOwner(owner string) { c.owner, c.hasOwner = owner, true }

// made returns the inner cancel-cause context, making it first if need
// be (and ending it when c ended before).
func (c *holdContext) made() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		p := c.parent
		if c.hasOwner {
			p = context.WithValue(p, ownerKey{}, c.owner)
		}
		if !c.parentCancel {
			p = context.WithoutCancel(p)
		}
		c.inner, c.endInner = context.WithCancelCause(p)
		if c.ended {
			c.endInner(c.endCause)
		} else if c.expires {
			c.timer = time.AfterFunc(time.Until(monoBase.Add(time.Duration(c.until.Load()))), c.check)
		}
	}
	return c.inner
}

// end ends the context with cause (nil: context.Canceled); the first end
// sets the cause.
func (c *holdContext) end(cause error) {
	c.mu.Lock()
	if c.inner != nil {
		if c.timer != nil {
			c.timer.Stop()
		}
		c.mu.Unlock()
		c.endInner(cause)
		return
	}
	if !c.ended {
		c.ended, c.endCause = true, cause
		c.endedFast.Store(true)
	}
	c.mu.Unlock()
}

// check ends the context with its cause when its deadline passed.
func (c *holdContext) check() {
	if time.Since(monoBase) >= time.Duration(c.until.Load()) && c.err() == nil {
		c.end(c.cause)
	}
}

// err is Err without the deadline's check.
func (c *holdContext) err() error {
	if c.endedFast.Load() {
		return context.Canceled
	}
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner == nil {
		return nil
	}
	return inner.Err()
}

// Err returns the context's error, context.Canceled as soon as the local
// deadline passed.
func (c *holdContext) Err() error {
	c.check()
	return c.err()
}

// Done returns a channel closed when the hold ends; it is closed already
// when the local deadline passed.
func (c *holdContext) Done() <-chan struct{} {
	c.check()
	return c.made().Done()
}

// Value returns the value of key; like Err, it ends the context first when
// the deadline passed, so that context.Cause reports the cause.
func (c *holdContext) Value(key any) any {
	if _, ok := key.(ownerKey); ok && c.hasOwner {
		return c.owner
	}
	c.check()
	return c.made().Value(key)
}

// lostCause reports whether the context ended (also by its deadline) with
// cause ErrLockLost, without making its inner context.
func (c *holdContext) lostCause() bool {
	c.check()
	c.mu.Lock()
	inner, ended, cause := c.inner, c.ended, c.endCause
	c.mu.Unlock()
	if inner != nil {
		return inner.Err() != nil && errors.Is(context.Cause(inner), ErrLockLost)
	}
	return ended && errors.Is(cause, ErrLockLost)
}

// Deadline returns the hold's local deadline (it moves forward with each
// renewal), or the parent's when that is earlier and the parent's
// cancellation ends the hold.
func (c *holdContext) Deadline() (time.Time, bool) {
	d := monoBase.Add(time.Duration(c.until.Load()))
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner != nil {
		if p, ok := inner.Deadline(); ok && p.Before(d) {
			return p, true
		}
	}
	return d, true
}

// extend moves the deadline to until when that is later. It reports false,
// moving nothing, when the context has ended (also by its deadline).
func (c *holdContext) extend(until time.Time) bool {
	if c.Err() != nil {
		return false
	}
	u := mono(until)
	for {
		cur := c.until.Load()
		if u <= cur || c.until.CompareAndSwap(cur, u) {
			return true
		}
	}
}

// reset moves the deadline to until, earlier or later (a permit's new
// lease, Permit.SetLease), and the timer that ends an unrenewed hold's
// context with it. It reports false, moving nothing, when the context has
// ended.
func (c *holdContext) reset(until time.Time) bool {
	if c.Err() != nil {
		return false
	}
	c.until.Store(mono(until))
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Reset(time.Until(until))
	}
	c.mu.Unlock()
	return true
}

// hold is what a lease and a permit share: the context that ends with the
// hold, and giving the hold up once.
type hold struct {
	ctx   *holdContext // &own
	own   holdContext
	lease time.Duration

	mu   sync.Mutex
	gone bool // given up
}

// start sets the hold's context up: deadline start+lease, ended at that
// deadline by a timer of its own (made when something first waits on its
// Done, see holdContext.expires) unless the watchdog renews it (its
// expiry ends it then). A Lease's context carries its owner: call
// h.own.withOwner first.
func (h *hold) start(parent context.Context, o acquireOptions, start time.Time, renewed bool, cause error) {
	h.lease = o.lease
	h.ctx = &h.own
	h.own.expires = !renewed
	h.own.init(parent, o.parentCancel, start.Add(o.lease), cause)
}

// cancel ends the hold's context with cause; the watchdog calls it.
func (h *hold) cancel(cause error) { h.ctx.end(cause) }

// extend moves the hold's local deadline to until; the watchdog calls it
// after each renewal, with the renewal's start plus the lease. It reports
// false when the hold's context had ended already with the hold lost (its
// deadline passed before the renewal's reply came): the watchdog must
// then stop renewing. A hold given up while its renewal was in flight
// (Unlock ends the context before it leaves the watchdog) is not lost:
// true, and its release takes it out of the watchdog.
func (h *hold) extend(until time.Time) bool {
	if h.ctx.extend(until) {
		return true
	}
	h.mu.Lock()
	gone := h.gone
	h.mu.Unlock()
	return gone && !h.ctx.lostCause()
}

// giveUp marks the hold given up and ends its context. It reports whether
// the hold was known to be lost (also by its local deadline), and ok false
// when it had been given up before.
func (h *hold) giveUp() (lost, ok bool) {
	h.mu.Lock()
	if h.gone {
		h.mu.Unlock()
		return false, false
	}
	h.gone = true
	h.mu.Unlock()
	lost = h.ctx.lostCause()
	h.ctx.end(nil)
	return lost, true
}

// ranOut reports whether the hold's local deadline (which no renewal
// moves once it was given up) has passed: a release that then found no
// hold in Redis ran after the lease ran out (a stall between giveUp and
// the script), and reports the hold lost, not never held.
func (h *hold) ranOut() bool {
	return mono(time.Now()) >= h.ctx.until.Load()
}

// abandon ends a hold that was never handed out, with cause.
func (h *hold) abandon(cause error) {
	h.mu.Lock()
	h.gone = true
	h.mu.Unlock()
	h.ctx.end(cause)
}
