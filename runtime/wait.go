package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/delay"
	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// The waiting every blocking acquire (locks of every kind, atomic
// multi-locks, RedLocks, semaphores, latches) shares: the wait's length,
// the pub/sub loop, and how a wait ends.

// defaultWait is how long a blocking call without an explicit wait waits:
// as long as ctx allows (-1) when ctx has a deadline, else the spec's
// default.
func defaultWait(ctx context.Context, spec time.Duration) time.Duration {
	if _, ok := ctx.Deadline(); ok {
		return -1
	}
	return spec
}

// checkWait returns ErrInvalidArgument for a negative explicit wait.
func checkWait(wait time.Duration) error {
	if wait < 0 {
		return fmt.Errorf("%w: negative wait %v", ErrInvalidArgument, wait)
	}
	return nil
}

// waitFor waits on channel until try succeeds. try makes one attempt: it
// reports whether it got what it wanted, or how long to sleep at most
// before the next attempt when no wake-up comes (the fallback timer); it
// is given the message that woke the waiter when one named owner ("" after
// the timer or any other wake-up). waitFor subscribes to channel and joins
// its queue as owner; it ends when try succeeds or fails, when the wait
// runs out (wait < 0: as long as ctx allows), or when the client is
// closed.
//
// registered says that the caller's own failed attempt, just before,
// registered owner in the object's waiter registry: a release after it
// names owner on channel. When channel was subscribed already, that
// message cannot be missed, so waitFor sleeps (at most sleep) before the
// first try; otherwise it tries again once subscribed.
//
// A waiter that leaves empty-handed passes a wake-up it did not use on to
// the next waiter of this client. A wait whose successful try followed
// the fallback timer (or a retry's backoff), not a wake-up, is reported
// as EventWaitFallback for obj.
//
// A transient error of try (Redis unreachable, loading, failing over: see
// transient) does not end the wait: waitFor tries again after a backoff
// (retryBackoff), and when the wait runs out meanwhile its error also
// matches the last such error.
//
// It returns try's other errors, ErrNotObtained when the wait ran out
// (also matching ctx's error when ctx ended it), or ErrClosed.
func (c *Client) waitFor(ctx context.Context, wait time.Duration, obj waitObject, channel, owner string, registered bool, sleep time.Duration,
	try func(msg string) (ok bool, sleep time.Duration, err error)) error {
	return waitOn(ctx, wait, obj, []waitSource{{c: c, channel: channel, owner: owner}}, registered, sleep,
		func(msgs []string) (bool, time.Duration, error) { return try(msgs[0]) })
}

// waitObject names what a wait waits for in its EventWaitFallback: the
// spec's object name and the key ("" name: no event; a latch's and a
// RedLock's waits use the timer for more than the fallback).
type waitObject struct {
	name, key string
	// reg, when set, is the waiter's registration, which its client
	// refreshes (refresher) for as long as the wait lasts.
	reg *registration
	// join, when set, joins the waiter (woken on signal) to what
	// refreshes its registration (a waiting Take's: takerRefresher) for
	// as long as the wait lasts, and returns its leave.
	join func(signal chan struct{}) (leave func())
	// regs, when set, are the waiter's registrations on each source's
	// client (nil where it has none), each refreshed, as reg is, by that
	// client's group of waiters there: a RedLock's, one per node.
	regs []*registration
	// tried is when the caller's attempt before the wait was sent, for a
	// wait that skips its first try (registered): a wake-up of every
	// waiter ("all": a forced unlock, a capacity change, a reconnect)
	// that came after it, before the waiter joined, makes it try at once.
	tried time.Time
	// settled, when set, stands for the try after a first subscription
	// (registered, and a channel was not subscribed yet, so that a release
	// may have published before it was): it reads the object and the
	// waiter's entry (plain commands in one round trip, where a try is a
	// script), within ctx (the wait's), and reports whether the waiter
	// may sleep at once: the object held by another owner and the waiter
	// still registered (whatever a release did meanwhile, it handed the
	// object to someone else and left the waiter queued). Any doubt (a
	// hold of the waiter's own, none, no entry, an error) is false: the
	// try runs.
	settled func(ctx context.Context) bool
}

// settledBy returns a wait's settled check (waitObject) for the waiter
// r: one round trip, a pipeline of what read adds (a read of the object's
// holds) and a ZSCORE of r's member. It reports true when r is still
// registered and the function read returned, given the replies, says that
// a hold in r's way is left. (A release passes over a waiter whose
// channel had no subscriber yet, taking it out of the registry: then it
// must try again, to register.)
func (c *Client) settledBy(r *registration, read func(ctx context.Context, p redis.Pipeliner) (blocked func() bool)) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		var blocked func() bool
		var score *redis.FloatCmd
		_, _ = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			blocked = read(ctx, p)
			score = p.ZScore(ctx, r.reg.Waiters, r.member)
			return nil
		})
		return score.Err() == nil && blocked() // (redis.Nil: not registered)
	}
}

// waitSource is one channel a wait listens on: channel on c's hub, whose
// messages naming owner are for this waiter.
type waitSource struct {
	c       *Client
	channel string
	owner   string
}

// waitOn is waitFor on several sources at once (a RedLock waits on a
// channel of each node's client): one waiter joins each source's queue,
// all of them sharing one signal, and try is given, per source, the
// message naming its owner that came since the last try (msgs[i], "" for
// none). registered skips the first try only when every source was
// subscribed already; the wait ends with ErrClosed when any source's
// client is closed. It is waitFor in every other respect.
func waitOn(ctx context.Context, wait time.Duration, obj waitObject, srcs []waitSource, registered bool, sleep time.Duration,
	try func(msgs []string) (ok bool, sleep time.Duration, err error)) error {
	start := time.Now()
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		wctx, cancel = context.WithTimeout(ctx, wait)
	}
	defer cancel()
	ready := true // every channel was subscribed already
	for _, s := range srcs {
		ready = ready && s.c.hub.Ready(s.channel)
	}
	skip := registered && ready
	subs, err := subscribeAll(wctx, srcs)
	if err != nil {
		return waitError(ctx, err)
	}
	signal := make(chan struct{}, 1)
	ws := make([]*hub.Waiter, len(srcs))
	for i, s := range srcs {
		ws[i] = s.c.hub.JoinAs(subs[i], s.owner, signal)
		if skip && !obj.tried.IsZero() && s.c.hub.BroadcastSince(subs[i], obj.tried) {
			skip = false
		}
	}
	if registered && !ready && obj.settled != nil {
		skip = obj.settled(wctx)
	}
	if obj.join != nil {
		defer obj.join(signal)()
	}
	if obj.reg != nil {
		defer srcs[0].c.joinRefresh(obj.reg, signal)()
		srcs[0].c.sampleClock(obj.reg.reg.Hold) // to tell a hand-off's age
	}
	for i, r := range obj.regs {
		if r != nil {
			defer srcs[i].c.joinRefresh(r, signal)()
		}
	}
	ok := false
	defer func() {
		for i, s := range srcs {
			s.c.hub.Leave(subs[i], ws[i], ok)
			s.c.hub.Unsubscribe(subs[i])
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastErr error
	msgs := make([]string, len(srcs))
	byTimer := false // the next try follows the timer, not a wake-up
	for retries := 0; ; {
		for _, s := range srcs {
			if s.c.hub.IsClosed() { // a closed hub wakes its waiters
				return ErrClosed
			}
		}
		if !skip {
			ok, sleep, err = try(msgs)
			switch {
			case ok:
				if byTimer && obj.name != "" {
					srcs[0].c.observe(ctx, Event{Kind: EventWaitFallback, Object: obj.name, Key: obj.key, Duration: time.Since(start)})
				}
				return nil
			case err != nil && !transient(err):
				return lastError(err, lastErr)
			case err != nil:
				lastErr, sleep = err, retryBackoff(retries)
				retries++
			default:
				lastErr, retries = nil, 0
			}
			if obj.reg != nil {
				// (The attempt registered the waiter again, for its
				// registration TTL: its group refreshes it in time.)
				srcs[0].c.distrust(obj.reg)
			}
		}
		skip = false
		timer.Reset(sleep)
		select {
		case <-signal:
			// (A wake-up by the client's refresh of the registration is
			// the wait's fallback: refresher.)
			byTimer = obj.reg != nil && obj.reg.woken.Swap(false)
			for i, s := range srcs {
				msgs[i] = s.c.hub.Message(ws[i])
			}
		case <-timer.C:
			byTimer = true
			clear(msgs)
		case <-srcs[0].c.hub.Closed():
			return ErrClosed
		case <-wctx.Done():
			if lastErr == nil && obj.reg != nil {
				lastErr = srcs[0].c.refreshErr(obj.reg)
			}
			return lastError(waitError(ctx, wctx.Err()), lastErr)
		}
	}
}

// subscribeAll subscribes every source's channel, at once when there are
// several (each subscribe waits at most confirmWait for its
// confirmation). On an error it drops what it subscribed.
func subscribeAll(ctx context.Context, srcs []waitSource) ([]*hub.Subscription, error) {
	subs := make([]*hub.Subscription, len(srcs))
	if len(srcs) == 1 {
		sub, err := srcs[0].c.hub.Subscribe(ctx, srcs[0].channel)
		subs[0] = sub
		return subs, err
	}
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Go(func() { subs[i], errs[i] = s.c.hub.Subscribe(ctx, s.channel) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil {
		for i, sub := range subs {
			if sub != nil {
				srcs[i].c.hub.Unsubscribe(sub)
			}
		}
	}
	return subs, err
}

// failFast reports whether a blocking call returns the error of its first
// attempt at once: always when it does not wait, otherwise unless the
// error is transient (waitFor rides those out).
func failFast(err error, wait time.Duration) bool {
	return err != nil && (wait == 0 || !transient(err))
}

// transient reports whether err is one a blocking call rides out inside
// its wait: Redis unreachable (connection refused, reset, closed, timed
// out) or answering that it cannot serve yet (LOADING, BUSY, TRYAGAIN,
// CLUSTERDOWN, MASTERDOWN, READONLY after a failover). The runtime's own
// errors and other Redis replies are not.
func transient(err error) bool {
	var rerr redis.Error
	var nerr net.Error
	switch {
	case err == nil, errors.Is(err, ErrClosed), errors.Is(err, redis.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &rerr):
		for _, p := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY"} {
			if redis.HasErrorPrefix(rerr, p) {
				return true
			}
		}
		return false
	}
	return errors.As(err, &nerr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, redis.ErrPoolTimeout)
}

// retryBackoff is how long a blocking call waits before its next attempt
// after the given number of transient errors in a row: 50ms doubling up
// to 1s (backoff).
func retryBackoff(retries int) time.Duration { return backoff(retries, time.Second) }

// backoff is the one rule of the runtime's retries after failures: the
// pause after the given number of failures in a row (0: the first) is
// 50ms doubled per failure, at most limit. Blocking calls use it through
// retryBackoff; the delay scheduler and the queue worker, which retry
// without a wait loop, with maxRetry.
func backoff(failures int, limit time.Duration) time.Duration {
	return delay.Backoff(failures, limit)
}

// lastError adds the last transient error of a wait to the error that
// ended it, so that both match.
func lastError(err, last error) error {
	if last == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("%w (last attempt: %w)", err, last)
}

// fallback is how long a waiter sleeps when no release message comes: the
// holder's remaining lease (the key expires then), or a second for a key
// without a TTL that someone else wrote.
func fallback(pttl time.Duration) time.Duration {
	switch {
	case pttl == -2*time.Millisecond: // gone between the calls: retry now
		return 0
	case pttl < 0:
		return time.Second
	}
	return pttl
}

// waitError wraps the end of a wait: ErrNotObtained, and the caller's
// context error when it was the caller's context that ended.
func waitError(ctx context.Context, err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrNotObtained, context.Cause(ctx))
	}
	return ErrNotObtained
}
