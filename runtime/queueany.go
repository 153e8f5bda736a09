package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Taking from any of several plain queues (Redisson's pollFromAny). A
// waiting TakeAny waits as one Take does on each queue at once (see
// await): registered as a waiting consumer in each queue's takers, asleep
// on each queue's client's wake-up channel (one wait, several sources, as
// a RedLock's waiter listens to every node), holding no pool connection.
// Woken by any queue's offer (or its refresh), it tries the queues in the
// order given; once it took, it leaves the others' takers, passing on the
// wake-ups it did not use.

// TakeAny takes the first ready item of any of queues, plain queues (a
// delayed queue's Queue too) of one payload type, on one client or
// several, waiting as long as ctx allows; it returns the item and the
// queue it came from. The queues are tried in the order given: when
// several have items ready, the first of them gives one. It returns
// ErrEmpty when ctx ended the wait (matching ctx's error),
// ErrInvalidArgument without queues, ErrClosed, or a Redis error (an
// item that does not decode is dead-lettered, as Take does, and the wait
// goes on).
func TakeAny[T any](ctx context.Context, queues ...*Queue[T]) (T, *Queue[T], error) {
	return takeAny(ctx, -1, queues)
}

// TryTakeAny is TakeAny waiting at most wait (0: take only what is ready
// now) and no longer than ctx allows; it returns ErrEmpty when nothing
// came, and TakeAny's other errors.
func TryTakeAny[T any](ctx context.Context, wait time.Duration, queues ...*Queue[T]) (T, *Queue[T], error) {
	var zero T
	if err := checkWait(wait); err != nil {
		return zero, nil, err
	}
	return takeAny(ctx, wait, queues)
}

// takeAny is TakeAny; wait < 0 means as long as ctx allows.
func takeAny[T any](ctx context.Context, wait time.Duration, queues []*Queue[T]) (T, *Queue[T], error) {
	var zero T
	if len(queues) == 0 {
		return zero, nil, fmt.Errorf("%w: TakeAny of no queues", ErrInvalidArgument)
	}
	for _, q := range queues {
		if q == nil {
			return zero, nil, fmt.Errorf("%w: TakeAny of a nil queue", ErrInvalidArgument)
		}
		defer q.q.done(q.q.serve(true)) // the delay timer of a delayed queue
	}
	end := waitEnd(ctx, wait)
	for {
		if ctx.Err() != nil {
			return zero, nil, emptyError(ctx)
		}
		body, i, err := popAny(ctx, end, wait == 0, queues)
		if err != nil {
			return zero, nil, err
		}
		q := queues[i]
		v, err := decodeItem(q.codec, body)
		if err == nil {
			q.q.c.extractItem(ctx, body)
			return v, q, nil
		}
		if err := q.q.bury(ctx, body, err); err != nil { // as Take does
			return zero, nil, err
		}
	}
}

// popAny takes the first ready body of any of queues (their index with
// it), waiting until end (zero: as long as ctx allows) unless once.
func popAny[T any](ctx context.Context, end time.Time, once bool, queues []*Queue[T]) ([]byte, int, error) {
	qs := make([]*queue, len(queues))
	for i, q := range queues {
		qs[i] = q.q
		if err := q.q.c.checkOpen(); err != nil {
			return nil, 0, err
		}
	}
	// What is ready now, without registering anywhere (a take only once
	// is not bounded by its end, now: as popN's, it runs to its reply).
	first := end
	if once {
		first = time.Time{}
	}
	for i, q := range qs {
		bodies, err := q.lpop(ctx, first, 1)
		if err != nil || len(bodies) > 0 {
			return firstOf(bodies), i, err
		}
	}
	if once || (!end.IsZero() && !time.Now().Before(end)) {
		return nil, 0, ErrEmpty
	}
	srcs := make([]waitSource, len(qs))
	for i, q := range qs {
		srcs[i] = waitSource{c: q.c, channel: q.c.wakePrefix(q.key) + ":" + q.c.id, owner: q.c.newOwner()}
	}
	defer func() {
		for i, q := range qs {
			q.leave(ctx, srcs[i].owner)
		}
	}()
	wait := time.Duration(-1)
	if !end.IsZero() {
		wait = time.Until(end)
	}
	var (
		got  []byte
		from int
	)
	registered := make([]bool, len(qs))
	tried := false // the first try follows the pass above
	err := waitOn(ctx, wait, waitObject{name: qs[0].def.Name, key: qs[0].key}, srcs, false, 0,
		func(msgs []string) (bool, time.Duration, error) {
			sleep := queueRefresh
			wctx, cancel := boundedContext(ctx, end)
			defer cancel()
			for i, q := range qs {
				if err := q.c.checkOpen(); err != nil {
					return false, 0, err
				}
				if (registered[i] || !tried) && msgs[i] == "" {
					// Not woken by this queue: refresh its entry first (it
					// takes the entry out when items are ready). The first
					// try registers at once: the pass above took nothing,
					// and queue_wait registers only while nothing is ready.
					s, err := q.register(wctx, srcs[i].owner)
					if err != nil {
						return false, 0, err
					}
					if s > 0 {
						registered[i], sleep = true, min(sleep, s)
						continue // nothing ready here
					}
				}
				bodies, err := q.lpop(ctx, end, 1)
				if err != nil {
					return false, 0, err
				}
				if len(bodies) > 0 {
					got, from = bodies[0], i
					return true, 0, nil
				}
				s, err := q.register(wctx, srcs[i].owner)
				if err != nil {
					return false, 0, err
				}
				registered[i] = s > 0
				sleep = min(sleep, s)
			}
			tried = true
			return false, sleep, nil
		})
	if errors.Is(err, ErrNotObtained) {
		return nil, 0, emptyError(ctx)
	}
	if err != nil {
		return nil, 0, err
	}
	return got, from, nil
}

// firstOf returns bodies' first, or nil.
func firstOf(bodies [][]byte) []byte {
	if len(bodies) == 0 {
		return nil
	}
	return bodies[0]
}
