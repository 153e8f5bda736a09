package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// How a blocking Take waits (see "Queues" in docs/design.md). It holds
// no connection of the go-redis pool while it waits: it takes with a
// non-blocking call (queue_pop, or the take script of a reliable queue),
// which registers it as a waiting consumer in the queue's takers key
// when it finds nothing; it then sleeps on its client's wake-up channel,
// in the runtime's wait loop (waitFor) as a lock's waiter does. A script that makes items ready (an offer, the
// delay timer's move, a Nack, a re-drive) wakes one registered consumer
// per item, by name (queue_wake in templates/queue.luainc); with nobody
// registered it costs one ZPOPMIN of a key that does not exist. A woken
// consumer takes again; one that finds the item gone (another consumer
// was quicker) registers again. A consumer whose client went away is
// passed over at once (the wake-up reaches no subscriber, as a lock's
// release finds: "Waiter registry" in docs/design.md). A wake-up that is
// lost (a pub/sub connection that failed, a consumer stopped with its
// connection open) costs latency, never liveness: its client refreshes
// the entries of its waiting Takes on a queue every queueRefresh, in one
// call (takerRefresher), and wakes them when items are ready then.

// queueRefresh is how often a client refreshes the entries of its
// waiting Takes in a queue's takers (the entries live QueueWaiterTTL), in
// one call per queue (takerRefresher), which also wakes them to take
// what a lost wake-up left ready. A waiting Take itself sleeps until a
// wake-up (groupedSleep bounds it).
const queueRefresh = QueueWaiterTTL / 3

// QueueWaiterTTL is how long a waiting Take's entry in its queue's takers
// lives after its last registration or refresh (templates/queue.luainc's
// taker_ttl): an entry of a consumer that died is passed over after it.
const QueueWaiterTTL = impl.QueueWaiterTTL

// takeAttempt makes one non-blocking take for owner (no registration when
// ""). registered says that owner may still be registered from an
// earlier attempt and was not woken by name (whose wake-up took its entry
// out). It reports whether it took something; when it took nothing and
// registered owner it returns how long to sleep at most (0: items are
// ready, try again now).
type takeAttempt func(owner string, registered bool) (took bool, sleep time.Duration, err error)

// await takes with attempt, waiting until end (zero: as long as ctx
// allows) while it takes nothing. The first attempt registers the owner
// when it finds nothing; the wait then sleeps on the client's wake-up
// channel (waitFor). A wait that ends empty-handed leaves the queue's
// takers (queue_wait), passing on a wake-up it did not use. It returns
// nil once attempt took something, ErrEmpty (matching ctx's error when
// ctx ended the wait, and the last transient error), ErrClosed, or
// attempt's error.
func (q *queue) await(ctx context.Context, end time.Time, attempt takeAttempt) error {
	owner := q.c.newOwner()
	channel := q.c.wakePrefix(q.key) + ":" + q.c.id
	if !q.c.hub.Ready(channel) {
		// Subscribed before the first attempt registers, so that the
		// wait loop finds it ready and sleeps: a wake-up cannot be
		// missed, and the wait needs no second attempt once subscribed
		// (many Takes starting together on a client would each make one).
		sctx, cancel := boundedContext(ctx, end)
		sub, err := q.c.hub.Subscribe(sctx, channel)
		cancel()
		if err == nil {
			defer q.c.hub.Unsubscribe(sub)
		}
	}
	var lastErr error
	tried := time.Now() // (waitObject.tried)
	took, sleep, err := attempt(owner, false)
	switch {
	case took:
		return nil
	case err != nil && !transient(err):
		q.leave(ctx, owner)
		return err
	case err != nil:
		lastErr = err
	}
	registered := err == nil && sleep > 0
	wait := time.Duration(-1)
	if !end.IsZero() {
		if wait = time.Until(end); wait <= 0 {
			q.leave(ctx, owner)
			return lastError(emptyError(ctx), lastErr)
		}
	}
	obj := waitObject{name: q.def.Name, key: q.key, tried: tried, join: func(signal chan struct{}) func() {
		return q.c.joinTakers(q, owner, signal)
	}}
	err = q.c.waitFor(ctx, wait, obj, channel, owner, registered, sleep,
		func(msg string) (bool, time.Duration, error) {
			took, sleep, err := attempt(owner, msg == "")
			if err != nil && transient(err) {
				lastErr = err
			}
			return took, sleep, err
		})
	if err == nil {
		return nil
	}
	q.leave(ctx, owner)
	if errors.Is(err, ErrNotObtained) {
		return lastError(emptyError(ctx), lastErr)
	}
	return err
}

// leave takes owner out of the queue's takers, passing on a wake-up it
// did not use (queue_wait), under a clean-up context (see cleanUp): best
// effort, its entry expires anyway.
func (q *queue) leave(ctx context.Context, owner string) {
	if q.c.hub.IsClosed() {
		return
	}
	cleanUp(ctx, func(rctx context.Context) {
		// queue_wait reply: int (not read)
		_ = q.ops().Wait(rctx, owner, true).Err()
	})
}

// register registers owner as a consumer waiting for a plain queue's
// items (queue_wait) within wctx's deadline, and returns how long to
// sleep: 0 when items are ready.
func (q *queue) register(wctx context.Context, owner string) (time.Duration, error) {
	// queue_wait reply: int (returned by wctx's end: see rdb.Queue.Wait)
	ttl, err := q.ops().Wait(wctx, owner, false).Int64()
	switch {
	case err != nil && wctx.Err() != nil:
		// The wait ended meanwhile: empty-handed, as when it runs out.
		return 0, fmt.Errorf("%w: waiting on %s: %w", ErrEmpty, q.key, err)
	case err != nil:
		return 0, fmt.Errorf("lockgen: waiting on %s: %w", q.key, err)
	}
	if ttl == 0 {
		return 0, nil
	}
	return groupedSleep, nil
}

// boundedContext returns ctx's values bounded by end and ctx's deadline
// (whichever comes first; none when neither), not cut short by ctx's
// cancellation: the context of one attempt of a take.
func boundedContext(ctx context.Context, end time.Time) (context.Context, context.CancelFunc) {
	bound := end
	if dl, ok := ctx.Deadline(); ok && (bound.IsZero() || dl.Before(bound)) {
		bound = dl
	}
	if bound.IsZero() {
		return context.WithoutCancel(ctx), func() {}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), bound)
}
