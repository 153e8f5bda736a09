package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/values"
	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

func init() {
	impl.NewLatch = func(c any, def *impl.LatchDef, key string) any { return c.(*Client).newLatch(def, key) }
}

// Latch returns the count-down latch with the given definition (emitted by
// lockgen) and key. It does not contact Redis.
func (c *Client) newLatch(def *impl.LatchDef, key string) *Latch {
	return &Latch{c: c, def: def, key: key}
}

// Latch is one distributed count-down latch: a generated constructor's
// result, such as latches.Warmup("job-7"). It opens when counted down to
// zero; Await waits for that. It is a small value that does not contact
// Redis until a method is called.
//
// A latch is set when TrySetCount sets its count, or else by its first
// CountDown, to the spec's count; until then Count reports the spec's
// count and Await waits. The key expires the spec's expire after it was
// set (24h by default), open or not, so finished latches do not pile up;
// the latch then starts over with the spec's count.
//
// In Redis the latch is the count (the key itself); the last count-down
// wakes waiters through key:ch.
type Latch struct {
	c   *Client
	def *impl.LatchDef
	key string
}

// Key returns the Redis key of the latch's count.
func (l *Latch) Key() string { return l.key }

// Name returns the latch's name in the spec.
func (l *Latch) Name() string { return l.def.Name }

func (l *Latch) channel() string { return l.ops().Channel() }

// ops returns l's script operations (runtime/internal/rdb).
func (l *Latch) ops() rdb.Latch { return rdb.Latch{Conn: &l.c.conn, Def: l.def, Key: l.key} }

// TrySetCount sets the latch's count to count, with the spec's expiry,
// unless the latch is already set (by TrySetCount or a CountDown); it
// reports whether it set it (also when its SETNX ran twice, a reply lost:
// the second run finds the key the first set). It returns
// ErrInvalidArgument when count < 1, or a Redis error.
func (l *Latch) TrySetCount(ctx context.Context, count int) (bool, error) {
	if count < 1 {
		return false, fmt.Errorf("%w: latch count %d", ErrInvalidArgument, count)
	}
	n := rdb.NewCounted(strconv.Itoa(count)) // its sends: see rdb.SendCounter
	ok, err := l.c.rdb.SetNX(ctx, l.key, n, l.def.Expire).Result()
	if err != nil {
		return false, fmt.Errorf("lockgen: setting %s: %w", l.key, err)
	}
	// A SETNX sent again after its reply was lost finds the key its first
	// run set: it set it.
	return ok || n.Sends() > 1, nil
}

// CountDown decrements the latch's count (setting the latch first when it
// is not set) and returns the count left, once per call: a call whose
// script ran more than once (a reply lost and the command sent again)
// counts down once; the count-down that reaches zero
// opens the latch and wakes every waiter on every client. Counting down an
// open latch does nothing and returns 0. Like a release, it completes
// although ctx was cancelled: it keeps ctx's values only, and gives up
// after ReleaseTimeout. It returns a Redis error when Redis fails.
func (l *Latch) CountDown(ctx context.Context) (int, error) {
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	// latch_count_down reply: int
	op := l.c.newSharedOp() // the same in every send (see resolve)
	send := func() *redis.Cmd {
		return l.ops().CountDown(ctx, op)
	}
	n, err := resolve(ctx, send(), send).Int()
	if err != nil {
		return 0, fmt.Errorf("lockgen: counting down %s: %w", l.key, err)
	}
	return n, nil
}

// Delete removes the latch's key (Redisson's delete): the latch starts
// over, unset, and counts from the spec's count again; Await callers keep
// waiting for it to open. It reports whether the key existed, or returns
// a Redis error. It is one DEL.
func (l *Latch) Delete(ctx context.Context) (bool, error) {
	n, err := l.c.rdb.Del(ctx, l.key).Result()
	if err != nil {
		return false, fmt.Errorf("lockgen: deleting %s: %w", l.key, err)
	}
	return n == 1, nil
}

// Count returns the latch's count: 0 when open, the spec's count when not
// set. It returns a Redis error when Redis fails.
func (l *Latch) Count(ctx context.Context) (int, error) {
	v, err := readValue(ctx, func() (string, error) { return l.c.rdb.Get(ctx, l.key).Result() })
	if errors.Is(err, redis.Nil) {
		return l.def.Count, nil
	}
	if err != nil {
		return 0, fmt.Errorf("lockgen: reading %s: %w", l.key, err)
	}
	n, err := values.LatchCount(v)
	if err != nil {
		return 0, fmt.Errorf("lockgen: reading %s: %w", l.key, err)
	}
	return n, nil
}

// Await waits until the latch is open, as long as the context allows; an
// open latch returns at once. Waiting costs no Redis traffic: the last
// count-down wakes every waiter through pub/sub, and a fallback timer
// (from 1s, doubling up to 30s) rechecks in case a message was lost. The
// goroutines of one Client awaiting one latch share their reads of its
// count (a GET): N of them cost a few GETs, not N, on their timers and
// when the latch opens, and one each to start.
//
// Transient Redis errors (Redis unreachable, loading, failing over) do
// not end the wait: Await retries with a backoff (50ms doubling to 1s).
//
// It returns nil when the latch is open, an error matching the context's
// error (and ErrNotObtained, like every wait that ran out) when the
// context ended first (and the last transient error, if
// the last check failed), ErrClosed when the client was closed, or
// another Redis error.
func (l *Latch) Await(ctx context.Context) error {
	channel := l.channel()
	// A first check before subscribing, unless another waiter of the
	// client has the channel subscribed: then the wait's first check,
	// once joined, is the only one needed.
	if !l.c.hub.Ready(channel) {
		if open, _, err := l.read(ctx, time.Time{}); open || (err != nil && !transient(err)) {
			return err
		}
	}
	defer l.c.latchReads.join(l.key)()
	// The one wait loop (waitFor): subscribed and queued before checking
	// again, so that the last count-down, if it comes after the check,
	// wakes us; the fallback timer backs off from 1s to 30s. A check on
	// the timer (no wake-up of the channel's waiters since the last) takes
	// any read sent since this waiter's last one (latchReads).
	backoff := time.Second
	var last time.Time // when the read of this waiter's last check was sent
	err := l.c.waitFor(ctx, -1, waitObject{}, channel, "", false, 0, func(string) (bool, time.Duration, error) {
		sleep := backoff
		backoff = min(2*backoff, 30*time.Second)
		after := time.Time{}
		if !last.IsZero() && !l.c.hub.WokeSince(channel, last) {
			after = last
		}
		open, sent, err := l.read(ctx, after)
		if err == nil {
			last = sent
		}
		return open, sleep, err
	})
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return l.awaitError(err)
}

func (l *Latch) awaitError(err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("lockgen: awaiting %s: %w", l.key, err)
}

// read reports whether the latch is open, by a read of its count sent
// after after (the zero time: after the call) that the client's other
// waiters on it share (latchReads), and when that read was sent.
func (l *Latch) read(ctx context.Context, after time.Time) (bool, time.Time, error) {
	open, sent, err := l.c.latchReads.read(ctx, l.key, after, l.open)
	if err != nil && ctx.Err() != nil {
		return false, sent, l.awaitError(ctx.Err())
	}
	return open, sent, err
}

// open reports whether the latch is open: its count is set and zero.
func (l *Latch) open(ctx context.Context) (bool, error) {
	if err := l.c.checkOpen(); err != nil {
		return false, err
	}
	v, err := readValue(ctx, func() (string, error) { return l.c.rdb.Get(ctx, l.key).Result() })
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil && ctx.Err() != nil:
		return false, l.awaitError(ctx.Err())
	case err != nil:
		return false, fmt.Errorf("lockgen: reading %s: %w", l.key, err)
	}
	return v == "0", nil
}
