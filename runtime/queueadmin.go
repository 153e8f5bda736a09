package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

// Operating a queue: pause and resume its consumers, and act on one item
// by its id (templates/queue_pause.lua and queue_item.lua).

// ErrItemState: an action on one item (RunNow, BuryID, RedriveID) found
// the item where the action does not apply, such as a delivery in flight,
// or a ready item asked to run now. Nothing changed; the error names
// where the item is.
var ErrItemState = errors.New("lockgen: the item is not where the action applies")

// ItemState is where an item of a queue is.
type ItemState string

// Where an item is (queue_item's words, shared with lockgen inspect).
const (
	ItemGone     ItemState = ""          // no item has the id: removed or acknowledged, or never there
	ItemReady    ItemState = "ready"     // ready to take
	ItemDelayed  ItemState = "delayed"   // offered with a delay, or given back to retry later
	ItemInFlight ItemState = "in-flight" // delivered and not settled yet
	ItemDead     ItemState = "dead"      // on the dead-letter list
)

// Item actions, as queue_item takes them.
const (
	itemRemove  = "remove"
	itemRunNow  = "run-now"
	itemBury    = "bury"
	itemRedrive = "redrive"
)

// pause runs queue_pause ("pause", "resume", or "" to read) and returns
// when the queue was paused, zero when it is not paused. A pause or a
// resume whose reply was lost is sent again: running it twice changes
// nothing more.
func (q *queue) pause(ctx context.Context, action string) (time.Time, error) {
	if err := q.c.checkOpen(); err != nil {
		return time.Time{}, err
	}
	ops := q.ops()
	var since int64
	var err error
	if action == "" {
		// queue_pause reply: int
		since, err = readValue(ctx, func() (int64, error) { return ops.Pause(ctx, "").Int64() })
	} else {
		send := func() *redis.Cmd { return ops.Pause(ctx, action) }
		cmd := send()
		if rdb.IsConnError(cmd.Err()) && ctx.Err() == nil {
			rctx, cancel := releaseContext(ctx)
			cmd = resolve(rctx, cmd, send)
			cancel()
		}
		// queue_pause reply: int
		since, err = cmd.Int64()
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("lockgen: %s of %s: %w", orRead(action), q.key, err)
	}
	if since == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(since), nil
}

func orRead(action string) string {
	if action == "" {
		return "pause state"
	}
	return action
}

// itemAction runs queue_item: action on the item id, with reason (a
// bury's). It reports where the item was and whether the action changed
// it. A call whose reply was lost is sent again as the same operation
// (its record answers).
func (q *queue) itemAction(ctx context.Context, action, id, reason string) (ItemState, bool, error) {
	if id == "" {
		return ItemGone, false, fmt.Errorf("%w: an empty item id", ErrInvalidArgument)
	}
	if err := q.c.checkOpen(); err != nil {
		return ItemGone, false, err
	}
	ops := q.ops()
	record := ops.OpRecord(q.c.newSharedOp())
	send := func() *redis.Cmd { return ops.Item(ctx, record, action, id, reason) }
	cmd := send()
	if rdb.IsConnError(cmd.Err()) && ctx.Err() == nil {
		rctx, cancel := releaseContext(ctx)
		cmd = resolve(rctx, cmd, send)
		cancel()
	}
	// queue_item reply: {string, int}
	res, err := cmd.Slice()
	if err != nil {
		return ItemGone, false, fmt.Errorf("lockgen: %s of item %s of %s: %w", action, id, q.key, err)
	}
	if len(res) != 2 {
		return ItemGone, false, fmt.Errorf("lockgen: %s of item %s of %s: unexpected reply %v", action, id, q.key, res)
	}
	was, _ := res[0].(string)
	done, _ := res[1].(int64)
	return ItemState(was), done == 1, nil
}

// itemCall is an item action as the exported methods answer it: whether
// it changed the item; ErrItemState when the item is where the action
// does not apply (target is where the action puts an item: an item there
// already is no error).
func (q *queue) itemCall(ctx context.Context, action, id, reason string, target ItemState) (bool, error) {
	was, done, err := q.itemAction(ctx, action, id, reason)
	switch {
	case err != nil:
		return false, err
	case done || was == ItemGone || was == target:
		return done, nil
	}
	return false, fmt.Errorf("%w: %s of item %s of %s: it is %s", ErrItemState, action, id, q.key, was)
}

// runNow is RunNow.
func (q *queue) runNow(ctx context.Context, id string) (bool, error) {
	return q.itemCall(ctx, itemRunNow, id, "", ItemReady)
}

// buryID is BuryID.
func (q *queue) buryID(ctx context.Context, id, reason string) (bool, error) {
	return q.itemCall(ctx, itemBury, id, reason, ItemDead)
}

// redriveID is RedriveID.
func (q *queue) redriveID(ctx context.Context, id string) (bool, error) {
	return q.itemCall(ctx, itemRedrive, id, "", ItemReady)
}

// removeID is a plain queue's RemoveID.
func (q *queue) removeID(ctx context.Context, id string) (bool, error) {
	return q.itemCall(ctx, itemRemove, id, "", ItemGone)
}

func init() {
	impl.QueueItemAction = func(ctx context.Context, q any, action, id, reason string) (string, bool, error) {
		qq, err := untypedQueue(q)
		if err != nil {
			return "", false, err
		}
		was, done, err := qq.itemAction(ctx, action, id, reason)
		return string(was), done, err
	}
}

// queueOf is implemented by every queue type.
type queueOf interface{ untyped() *queue }

func (q *Queue[T]) untyped() *queue         { return q.q }
func (q *ReliableQueue[T]) untyped() *queue { return q.q }

func untypedQueue(q any) (*queue, error) {
	u, ok := q.(queueOf)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a queue", ErrInvalidArgument, q)
	}
	return u.untyped(), nil
}

// Pause pauses the queue's consumers, on every client: producers keep
// offering, and the delay timer keeps moving due items, but Takes (plain
// and reliable, batch and waiting ones, and so workers) take nothing
// until Resume; waiting Takes keep waiting, and Resume wakes them. The
// state lives in Redis (the key <queue>:paused, read by the take scripts
// in the same step as they take), so it holds for every process and
// survives restarts. Pausing a paused queue changes nothing. Drain,
// Peek and the item actions are not paused. It returns ErrClosed or a
// Redis error.
func (q *Queue[T]) Pause(ctx context.Context) error { _, err := q.q.pause(ctx, "pause"); return err }

// Resume resumes the queue's consumers after Pause, and wakes as many
// waiting Takes as items are ready. Resuming a queue that is not paused
// changes nothing. It returns ErrClosed or a Redis error.
func (q *Queue[T]) Resume(ctx context.Context) error { _, err := q.q.pause(ctx, "resume"); return err }

// Paused reports whether the queue is paused, and since when (on the
// Redis server's clock; zero when it is not), in one round trip. It
// returns ErrClosed or a Redis error.
func (q *Queue[T]) Paused(ctx context.Context) (bool, time.Time, error) {
	since, err := q.q.pause(ctx, "")
	return !since.IsZero(), since, err
}

// Pause pauses the queue's consumers (see Queue.Pause): deliveries in
// flight stay in flight, and can be settled and extended as usual.
func (q *ReliableQueue[T]) Pause(ctx context.Context) error {
	_, err := q.q.pause(ctx, "pause")
	return err
}

// Resume resumes the queue's consumers (see Queue.Resume).
func (q *ReliableQueue[T]) Resume(ctx context.Context) error {
	_, err := q.q.pause(ctx, "resume")
	return err
}

// Paused reports whether the queue is paused, and since when (see
// Queue.Paused).
func (q *ReliableQueue[T]) Paused(ctx context.Context) (bool, time.Time, error) {
	since, err := q.q.pause(ctx, "")
	return !since.IsZero(), since, err
}

// RunNow makes the delayed item id (offered with a delay, or given back
// by Retry or the worker's backoff) ready now, at the end of the ready
// list, keeping its delivery count, and wakes a waiting Take. It reports
// whether it moved the item: false when no item has the id, or it is
// ready already. It returns ErrItemState when the item is in flight or
// dead, ErrInvalidArgument for an empty id, ErrClosed, or a Redis error.
// One script call; running it twice moves nothing more.
func (q *ReliableQueue[T]) RunNow(ctx context.Context, id string) (bool, error) {
	return q.q.runNow(ctx, id)
}

// BuryID moves the ready or delayed item id to the dead letters with
// reason (its delivery count kept). It reports whether it moved the
// item: false when no item has the id, or it is dead already. It returns
// ErrItemState when the item is in flight (its consumer settles it; Bury
// a delivery from its Delivery), ErrInvalidArgument for an empty id,
// ErrClosed, or a Redis error. One script call; running it twice moves
// nothing more.
func (q *ReliableQueue[T]) BuryID(ctx context.Context, id, reason string) (bool, error) {
	return q.q.buryID(ctx, id, reason)
}

// RedriveID puts the dead letter id back at the end of the ready list
// with its delivery count reset (as Redrive does for the oldest ones),
// and wakes a waiting Take. It reports whether it moved the item: false
// when no item has the id, or it is ready already. It returns
// ErrItemState when the item is delayed or in flight, ErrInvalidArgument
// for an empty id, ErrClosed, or a Redis error.
func (q *ReliableQueue[T]) RedriveID(ctx context.Context, id string) (bool, error) {
	return q.q.redriveID(ctx, id)
}

// RunNow makes the delayed item id (DelayedItem.ID) ready now, at the end
// of the ready list, and wakes a waiting Take; the item then has no id
// (a plain queue's ready items have none). It reports whether it moved
// the item, and returns the errors of ReliableQueue.RunNow.
func (q *DelayedQueue[T]) RunNow(ctx context.Context, id string) (bool, error) {
	return q.q.runNow(ctx, id)
}

// BuryID moves the delayed item id to the dead letters with reason. It
// reports whether it moved the item, and returns the errors of
// ReliableQueue.BuryID. (A plain queue's ready items have no id.)
func (q *DelayedQueue[T]) BuryID(ctx context.Context, id, reason string) (bool, error) {
	return q.q.buryID(ctx, id, reason)
}

// RemoveID removes the delayed item id (DelayedItem.ID) or the dead
// letter id (DeadLetter.ID), and reports whether there was one. It
// returns ErrInvalidArgument for an empty id, ErrClosed, or a Redis
// error. One script call; running it twice removes nothing more.
func (q *Queue[T]) RemoveID(ctx context.Context, id string) (bool, error) {
	return q.q.removeID(ctx, id)
}

// RedriveID puts the dead letter id (DeadLetter.ID) back at the end of
// the queue and wakes a waiting Take. It reports whether it moved the
// item, and returns the errors of ReliableQueue.RedriveID.
func (q *Queue[T]) RedriveID(ctx context.Context, id string) (bool, error) {
	return q.q.redriveID(ctx, id)
}
