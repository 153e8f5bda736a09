package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The waiting every blocking acquire (locks, fair locks, semaphores)
// shares: the wait's length, the pub/sub loop, and how a wait ends.

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
// before the next attempt when no wake-up comes (the fallback timer).
// waitFor subscribes to channel and joins its queue before the first
// attempt, so that a release published after any attempt wakes the
// waiter; it ends when try succeeds or fails, when the wait runs out
// (wait < 0: as long as ctx allows), or when the client is closed.
//
// When passOn is set, a wake-up that arrived but was not needed goes to
// the next waiter of this client even after a success (a semaphore's
// release may free permits for several waiters); otherwise only a waiter
// that leaves empty-handed passes its wake-up on.
//
// It returns try's error, ErrNotObtained when the wait ran out (also
// matching ctx's error when ctx ended it), or ErrClosed.
func (c *Client) waitFor(ctx context.Context, wait time.Duration, channel string, passOn bool,
	try func(sub *subscription, w *waiter) (ok bool, sleep time.Duration, err error)) error {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		wctx, cancel = context.WithTimeout(ctx, wait)
	}
	defer cancel()
	sub, err := c.hub.subscribe(wctx, channel)
	if err != nil {
		return waitError(ctx, err)
	}
	defer c.hub.unsubscribe(sub)
	w := c.hub.join(sub)
	ok := false
	defer func() { c.hub.leave(sub, w, ok && !passOn) }()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var sleep time.Duration
		if ok, sleep, err = try(sub, w); ok || err != nil {
			return err
		}
		timer.Reset(sleep)
		select {
		case <-w.signal:
		case <-timer.C:
		case <-c.hub.closedCh():
			return ErrClosed
		case <-wctx.Done():
			return waitError(ctx, wctx.Err())
		}
	}
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
