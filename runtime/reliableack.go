package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

// AckAll acknowledges several deliveries of this queue at once (a batch
// TakeN returned, say) in one round trip and one script, whose commands
// do not grow with the number of deliveries: 7 at most (see
// templates/queue_ack.lua), where an Ack of each costs 5. Each delivery
// is acknowledged as by its Ack; those this program acknowledged already
// are passed over, and ds may be empty.
//
// It returns nil when every delivery is acknowledged, else the errors of
// those that are not, joined, each as its Ack would return it:
// ErrDeliveryExpired (no longer in flight), ErrDeliverySettled (given
// back), or a Redis error for all of them. It returns ErrInvalidArgument,
// acknowledging nothing, for a delivery of another queue. Like Ack, it
// completes although ctx was cancelled.
func (q *ReliableQueue[T]) AckAll(ctx context.Context, ds ...*Delivery[T]) error {
	for _, d := range ds {
		if d == nil || d.d.q.key != q.q.key {
			return fmt.Errorf("%w: AckAll of a delivery of another queue than %s", ErrInvalidArgument, q.q.key)
		}
	}
	// Lock each delivery (a Delivery settles once), in the order of their
	// ids, so that two AckAll of the same deliveries cannot deadlock,
	// passing over those settled and those given twice.
	uniq := make([]*delivery, 0, len(ds))
	seen := make(map[*delivery]bool, len(ds))
	for _, x := range ds {
		if !seen[x.d] {
			seen[x.d] = true
			uniq = append(uniq, x.d)
		}
	}
	slices.SortFunc(uniq, func(a, b *delivery) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.n, b.n)
	})
	var todo []*delivery
	var errs []error
	for _, d := range uniq {
		d.smu.Lock()
		defer d.smu.Unlock()
		if done, err := d.settledError(true); done {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		todo = append(todo, d)
	}
	switch len(todo) {
	case 0:
		return errors.Join(errs...)
	case 1:
		// One left: the single form of the script (5 commands).
		return errors.Join(append(errs, todo[0].ackLocked(ctx))...)
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	ids, ns := make([]any, len(todo)), make([]int64, len(todo))
	for i, d := range todo {
		if i == 0 {
			ids[i] = rdb.NewCounted(d.id)
		} else {
			ids[i] = d.id
		}
		ns[i] = d.n
	}
	send := func() *redis.Cmd { return q.q.ops().AckAll(ctx, ids, ns) }
	// queue_ack reply: int | {int...}
	res, err := resolve(ctx, send(), send).Int64Slice()
	if err == nil && len(res) != len(todo) {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("lockgen: acknowledging %d deliveries of %s: %w", len(todo), q.q.key, err))...)
	}
	resent := rdb.Resent(ids[0])
	for i, d := range todo {
		if res[i] == 0 && !resent {
			// (An earlier run of this call, whose reply was lost, may
			// have acknowledged them all: see rdb.SendCounter.)
			errs = append(errs, fmt.Errorf("%w: delivery %s of %s", ErrDeliveryExpired, d.id, q.q.key))
			continue
		}
		d.settled = 'a'
		q.q.c.observe(ctx, Event{Kind: EventAcked, Object: q.q.def.Name})
	}
	return errors.Join(errs...)
}
