package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

// Exactly one effect per call. A client runs a script at least once: when
// a connection drops after Redis ran a command and before its reply came
// back, go-redis sends the command again (MaxRetries), and so does a
// proxy or a failover. The scripts are written so that a second run
// answers what the first answered and changes nothing (see "Exactly one
// effect" in the package doc). This file holds the runtime's side of it:
// operation ids; arguments that count or mark their sends; sending a
// release-like call again when no reply came (resolve); and bounding an
// acquire by its caller's deadline, with the clean-up after an attempt
// that was cut short (attemptContext, within, cleanUp).

// newOp returns an operation id unique among the calls of this client
// (so among the calls of any one owner, whose ids all come from it), and
// short: for a record kept per owner (a lock's value). Each is sent as an
// argument of the one call it names; a script that finds it recorded ran
// already for this call.
func (c *Client) newOp() string {
	var buf [16]byte
	return string(strconv.AppendUint(buf[:0], c.ops.Add(1), 36))
}

// newSharedOp returns an operation id unique across clients, for a
// record that several clients' calls share (a latch's): newOp's, after
// the client's id.
func (c *Client) newSharedOp() string {
	var buf [64]byte
	b := append(append(buf[:0], c.id...), '.')
	return string(strconv.AppendUint(b, c.ops.Add(1), 36))
}

// newTaggedOp returns an operation id for a record that several
// clients' calls share and that only a resend looks for (a GCRA or token
// bucket limiter's state): newOp's, after the client's tag, a 10-byte
// hash of its id (opTag). It is a third of newSharedOp's length, which
// the state holding eight of them is read and written with on every
// decision; two clients whose tags collide (a chance of one in 2^50 for
// a pair) could only take each other's record for their own when their
// counters also meet within eight writes of one state, and a resend
// came then.
func (c *Client) newTaggedOp() string {
	var buf [32]byte
	b := append(append(buf[:0], c.tag...), '.')
	return string(strconv.AppendUint(b, c.ops.Add(1), 36))
}

// opTag returns a client's tag (newTaggedOp): 50 bits of the FNV-1a hash
// of its id, in base 32 (10 characters).
func opTag(id string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	x := h.Sum64()
	const digits = "0123456789abcdefghijklmnopqrstuv"
	var b [10]byte
	for i := range b {
		b[i] = digits[x&31]
		x >>= 5
	}
	return string(b[:])
}

// leaseOwner is a Lease sent as its owner argument: its sends are counted
// in the Lease (no allocation on Unlock's path).
type leaseOwner Lease

func (a *leaseOwner) MarshalBinary() ([]byte, error) {
	a.sent.Add(1)
	return unsafe.Slice(unsafe.StringData(a.owner), len(a.owner)), nil
}

// Sends and ResetSends make it an rdb.SendCounter.
func (a *leaseOwner) Sends() int32 { return a.sent.Load() }
func (a *leaseOwner) ResetSends()  { a.sent.Store(0) }

// String is the owner, as go-redis prints the command (a tracing hook's
// statement, a log line).
func (a *leaseOwner) String() string { return a.owner }

// endedContext returns a context that has ended with cause: the context
// of a nil lease or permit (a failed TryLock's), so that work guarded by
// it does not start.
func endedContext(cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx
}

// cleanUpWait bounds how long a call that failed waits for its clean-up
// (leaving a waiter registry, giving back what an attempt cut short by
// the deadline may have taken) before it returns: the clean-up goes on in
// the background, under a release context (ReleaseTimeout), so that a
// call returns within its deadline plus cleanUpWait also when Redis
// cannot be reached. When Redis answers, a clean-up takes one round trip
// and is done before the call returns.
const cleanUpWait = 50 * time.Millisecond

// cleanUp runs f under a release context of ctx, waiting for it at most
// cleanUpWait.
func cleanUp(ctx context.Context, f func(context.Context)) {
	waitCleanUp(startCleanUp(ctx, f))
}

// cleanUpWithin runs f under a release context of ctx, waiting for it
// while ctx lasts and cleanUpWait more: a clean-up the call promises done
// before it returns (a failed RedLock attempt's undoing), when Redis
// answers in time.
func cleanUpWithin(ctx context.Context, f func(context.Context)) {
	done := startCleanUp(ctx, f)
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	waitCleanUp(done)
}

// startCleanUp runs f under a release context of ctx in a goroutine of its
// own, and returns a channel closed when f returns.
func startCleanUp(ctx context.Context, f func(context.Context)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		rctx, cancel := releaseContext(ctx)
		defer cancel()
		f(rctx)
	}()
	return done
}

// waitCleanUp waits for done at most cleanUpWait.
func waitCleanUp(done <-chan struct{}) {
	t := time.NewTimer(cleanUpWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// attemptContext returns the context of an acquire's attempt. Unbounded
// (a re-entry's): ctx's values, not its cancellation (an abandoned reply
// would leave a hold nobody knows of). Bounded: ctx itself when its
// deadline comes before end (a TryX's wait; zero for none), or ctx's
// values with end as the deadline; the caller then cleans up after an
// attempt the deadline or a cancellation cut short. Background without an
// end stays as it is (no wrapper, no allocation on the uncontended path).
func attemptContext(ctx context.Context, bounded bool, end time.Time) (context.Context, context.CancelFunc) {
	nop := func() {}
	if !bounded {
		if ctx == context.Background() {
			return ctx, nop
		}
		return context.WithoutCancel(ctx), nop
	}
	if dl, ok := ctx.Deadline(); ok && (end.IsZero() || dl.Before(end)) {
		return ctx, nop
	}
	if end.IsZero() {
		if ctx == context.Background() {
			return ctx, nop
		}
		return context.WithoutCancel(ctx), nop
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}

// within returns call's result, or ok false once ctx has ended first
// (its deadline passed, or it was cancelled): call then goes on alone, in
// a goroutine of its own, and its result is dropped (the caller cleans up
// after what it may have done). go-redis keeps a deadline for commands on
// a working connection, but not when the server stops answering (a
// stopped or partitioned server, or one that accepts and never answers,
// holds the call for its DialTimeout, 5 s).
func within[T any](ctx context.Context, call func() T) (v T, ok bool) {
	done := make(chan T, 1)
	go func() {
		done <- call()
	}()
	select {
	case v = <-done:
		return v, true
	case <-ctx.Done():
		return v, false
	}
}

// readValue returns f's result, f being a read (one round trip, or one
// pipeline) that changes nothing; or, once ctx ends first, ctx's error,
// leaving f to finish alone: a read keeps its caller's deadline also when
// the server stops answering (see within). A context that never ends
// costs no goroutine.
func readValue[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	r, ok := within(ctx, func() result {
		v, err := f()
		return result{v, err}
	})
	if !ok {
		var zero T
		return zero, ctx.Err()
	}
	return r.v, r.err
}

// lateCmd is the result of a command within gave up on: ctx's error.
func lateCmd(ctx context.Context) *redis.Cmd { return rdb.Failed(ctx, ctx.Err()) }

// attemptError is the error of an acquire's attempt on key that failed
// with err: one that its deadline or a cancellation cut short did not
// obtain (it matches ErrNotObtained and the context's error, as a wait
// that ran out does).
func attemptError(key string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: acquiring %s: %w", ErrNotObtained, key, err)
	}
	return fmt.Errorf("lockgen: acquiring %s: %w", key, err)
}

// resolve returns cmd, the reply of a release-like call (Unlock,
// Release, CountDown, Ack, Nack) whose every run after the first changes
// nothing, or, when it failed without a reply from Redis (go-redis gave up
// after its retries: the call may or may not have run), the reply of send,
// the same call sent again while ctx, a release context, allows: so the
// caller learns what happened instead of an error for a release that may
// have been done. It backs off from 50 ms, doubling up to 1 s.
func resolve(ctx context.Context, cmd *redis.Cmd, send func() *redis.Cmd) *redis.Cmd {
	for retries := 0; rdb.IsConnError(cmd.Err()) && ctx.Err() == nil; retries++ {
		t := time.NewTimer(retryBackoff(retries))
		select {
		case <-ctx.Done():
			t.Stop()
			return cmd
		case <-t.C:
		}
		cmd = send()
	}
	return cmd
}
