package runtime

import (
	"context"
	"fmt"
	"time"
)

// Moving items between queues (Redisson's takeLastAndOfferFirstTo and
// pollLastAndOfferFirstTo, Redis' BLMOVE). Two queues' keys are in two
// hash slots (each object's keys share one tag), so no single script can
// take from one and add to the other on a cluster. A reliable queue's
// move is made safe instead: it enqueues the delivery's item on the
// destination under a key derived from the item's id (WithKey), then
// acknowledges the delivery; a move cut short after the enqueue (the
// process died, the acknowledgement failed) leaves the item in flight,
// it comes back after its visibility timeout, and moving it again adds
// nothing (the key is known) and acknowledges it. So the item ends up
// on the destination once, and leaves the source once. A plain queue's
// items are taken at most once; its move is a take and an offer, and an
// item is lost only when the process dies between the two.

// MoveTo takes one item of q, waiting as long as ctx allows, and enqueues
// it on dst, ready now (at the tail: first in, first out; Redisson's
// takeLastAndOfferFirstTo moves the last to the head). It returns the
// item and its id on dst. It is a Take, an Enqueue and an Ack (three
// round trips). It returns Take's errors (ErrEmpty when ctx ended the
// wait), Delivery.MoveTo's, ErrInvalidArgument for a nil dst, or
// ErrInvalidArgument when dst is q.
func (q *ReliableQueue[T]) MoveTo(ctx context.Context, dst *ReliableQueue[T]) (T, string, error) {
	return q.moveTo(ctx, -1, dst)
}

// TryMoveTo is MoveTo waiting at most wait (0: only an item ready now)
// for an item; it returns ErrEmpty when none came, ErrInvalidArgument for
// a negative wait, and MoveTo's other errors.
func (q *ReliableQueue[T]) TryMoveTo(ctx context.Context, wait time.Duration, dst *ReliableQueue[T]) (T, string, error) {
	var zero T
	if err := checkWait(wait); err != nil {
		return zero, "", err
	}
	return q.moveTo(ctx, wait, dst)
}

func (q *ReliableQueue[T]) moveTo(ctx context.Context, wait time.Duration, dst *ReliableQueue[T]) (T, string, error) {
	var zero T
	if dst == nil || dst.q == q.q || dst.q.key == q.q.key {
		return zero, "", fmt.Errorf("%w: a move from %s to itself or nowhere", ErrInvalidArgument, q.q.key)
	}
	var (
		d   *Delivery[T]
		err error
	)
	if wait < 0 {
		d, err = q.Take(ctx)
	} else {
		d, err = q.TryTake(ctx, wait)
	}
	if err != nil {
		return zero, "", err
	}
	id, err := d.MoveTo(ctx, dst)
	return d.Value, id, err
}

// MoveTo enqueues the delivery's item on dst, ready now, under the key
// "move:<its queue's key>:<its id>" (WithKey, for as long as the item can
// be delivered again: its queue's visibility times one more than its
// maxDeliveries, and a minute), and acknowledges the delivery; it returns the item's
// id on dst. Called again for a redelivery of the same item (a move cut
// short: see "Moving items" in the package doc) it adds nothing and
// returns the first id. When the Enqueue fails the delivery is given back
// (Release) and its error returned; when the Ack fails the item is on
// dst and the error says so (wrapping Ack's: the item comes back to its
// queue after its visibility timeout, where moving it again only
// acknowledges it).
func (d *Delivery[T]) MoveTo(ctx context.Context, dst *ReliableQueue[T]) (string, error) {
	if dst == nil {
		return "", fmt.Errorf("%w: a move to a nil queue", ErrInvalidArgument)
	}
	src := d.d.q
	window := src.def.Visibility*time.Duration(max(src.def.MaxDeliveries, 1)+1) + time.Minute
	id, err := dst.Enqueue(ctx, d.Value, WithKey("move:"+src.key+":"+d.ID(), window))
	if err != nil {
		_ = d.Release(context.WithoutCancel(ctx))
		return "", fmt.Errorf("lockgen: moving item %s of %s to %s: %w", d.ID(), src.key, dst.q.key, err)
	}
	if err := d.Ack(ctx); err != nil {
		return id, fmt.Errorf("lockgen: moved item %s of %s to %s as %s, but its acknowledgement failed (it comes back to %s, where moving it again only acknowledges it): %w",
			d.ID(), src.key, dst.q.key, id, src.key, err)
	}
	return id, nil
}

// MoveTo takes one item of q, waiting as long as ctx allows, and offers it
// to dst (at its tail), returning it. A plain queue's items are taken at
// most once: an item is lost if the process dies between the take and
// the offer; when the offer fails, the item is put back at q's head. It
// returns Take's errors (ErrEmpty when ctx ended the wait), the offer's,
// or ErrInvalidArgument for a nil dst or dst q.
func (q *Queue[T]) MoveTo(ctx context.Context, dst *Queue[T]) (T, error) {
	return q.moveTo(ctx, -1, dst)
}

// TryMoveTo is MoveTo waiting at most wait (0: only an item ready now);
// it returns ErrEmpty when none came, ErrInvalidArgument for a negative
// wait, and MoveTo's other errors.
func (q *Queue[T]) TryMoveTo(ctx context.Context, wait time.Duration, dst *Queue[T]) (T, error) {
	var zero T
	if err := checkWait(wait); err != nil {
		return zero, err
	}
	return q.moveTo(ctx, wait, dst)
}

func (q *Queue[T]) moveTo(ctx context.Context, wait time.Duration, dst *Queue[T]) (T, error) {
	var zero T
	if dst == nil || dst.q == q.q || dst.q.key == q.q.key {
		return zero, fmt.Errorf("%w: a move from %s to itself or nowhere", ErrInvalidArgument, q.q.key)
	}
	v, err := q.take(ctx, wait)
	if err != nil {
		return zero, err
	}
	if err := dst.Offer(ctx, v); err != nil {
		if body, eerr := encodeAll(q.q, q.codec, []T{v}); eerr == nil {
			q.q.giveBack([]any{"", string(body[0])})
		}
		return zero, fmt.Errorf("lockgen: moving an item of %s to %s: %w", q.q.key, dst.q.key, err)
	}
	return v, nil
}
