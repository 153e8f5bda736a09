package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// Item actions, as ItemResult.Action and the dashboard name them.
const (
	ActionRemove  = "remove"
	ActionRedrive = "redrive"
	ActionRunNow  = "run-now"
	ActionBury    = "bury" // move to the dead letters
)

// The item actions run the runtime's queue_item script (through
// lockimpl.QueueItemAction): the runtime's RunNow, BuryID, RedriveID and
// RemoveID are the same call.

// DefaultBuryReason is the reason BuryItem gives a dead letter when its
// caller gives none.
const DefaultBuryReason = "dead-lettered by an operator"

// ItemResult is what an action on one item of a queue did.
type ItemResult struct {
	Action string `json:"action"` // ActionRemove, ActionRedrive, ActionRunNow or ActionBury
	Key    string `json:"key"`    // the queue instance's key
	ID     string `json:"id"`
	// Was is where the item was when the action ran: ItemReady,
	// ItemDelayed, ItemInFlight, ItemDead, or "" when no item had the id
	// (it was removed, or has been acknowledged, already; or never was).
	Was string `json:"was"`
	// Done reports that the action changed the item. When it did not,
	// Refused tells an item the action does not apply to from one that is
	// gone or already where the action puts it.
	Done bool `json:"done"`
}

// Applies reports whether an item action (ActionRemove, ActionRedrive,
// ActionRunNow, ActionBury) changes an item in state: a remove one that
// is ready, delayed or dead, a redrive a dead one, a run-now a delayed
// one, a bury a ready or delayed one.
func Applies(action, state string) bool {
	switch action {
	case ActionRemove:
		return state == ItemReady || state == ItemDelayed || state == ItemDead
	case ActionRedrive:
		return state == ItemDead
	case ActionRunNow:
		return state == ItemDelayed
	case ActionBury:
		return state == ItemReady || state == ItemDelayed
	}
	return false
}

// Refused reports that the item is there but the action does not apply
// to it where it is: a remove of an item in flight, a redrive of an item
// that is not dead, a run-now of one that is not delayed. A result that
// is neither Done nor Refused is a second run's: the item is gone, or
// (redrive, run-now) ready already, or (bury) dead already; nothing
// needed doing.
func (r ItemResult) Refused() bool {
	return !r.Done && r.Was != "" && r.Was != r.target()
}

// target is where the action puts an item ("" for gone).
func (r ItemResult) target() string {
	switch r.Action {
	case ActionRemove:
		return ""
	case ActionBury:
		return ItemDead
	}
	return ItemReady
}

// String says in one line what the action did.
func (r ItemResult) String() string {
	what := fmt.Sprintf("item %s of %s", r.ID, r.Key)
	switch {
	case r.Done && r.Action == ActionRemove:
		return fmt.Sprintf("removed %s (it was %s)", what, r.Was)
	case r.Done && r.Action == ActionRedrive:
		return fmt.Sprintf("redrove %s: ready again, its delivery count reset", what)
	case r.Done && r.Action == ActionBury:
		return fmt.Sprintf("moved %s to the dead letters (it was %s)", what, r.Was)
	case r.Done:
		return fmt.Sprintf("%s is ready now (it was delayed)", what)
	case r.Was == "":
		return fmt.Sprintf("no %s: removed or acknowledged already, or never there; nothing changed", what)
	case !r.Refused():
		return fmt.Sprintf("%s is %s already; nothing changed", what, r.Was)
	case r.Action == ActionRemove:
		return fmt.Sprintf("%s is in flight: not removed (remove it once it is settled or dead-lettered); nothing changed", what)
	case r.Action == ActionRedrive:
		return fmt.Sprintf("%s is %s, not dead: not redriven; nothing changed", what, r.Was)
	case r.Action == ActionBury:
		return fmt.Sprintf("%s is %s: not dead-lettered (a delivery in flight is settled by its consumer); nothing changed", what, r.Was)
	}
	return fmt.Sprintf("%s is %s, not delayed: not run now; nothing changed", what, r.Was)
}

// RemoveItem removes the item id of a queue instance while it is ready,
// delayed or dead, in one script run: it leaves every list and its body
// and counters are deleted. An item in flight is not removed (Refused);
// no item with the id is no error (Was ""), so that removing twice is
// safe. It returns ErrUnknownObject, ErrBadParams, ErrUnsupported for an
// object that is not a queue, or a Redis error.
func (in *Inspector) RemoveItem(ctx context.Context, id, object string, values ...string) (ItemResult, error) {
	return in.itemAction(ctx, ActionRemove, id, object, values)
}

// RedriveItem puts the dead letter id of a queue instance back at the end
// of its ready list, with its delivery count reset (as Redrive does for
// the oldest ones). It changes nothing for an item that is not dead
// (Refused, or ready already), nor when no item has the id (Was ""). It
// returns the errors of RemoveItem.
func (in *Inspector) RedriveItem(ctx context.Context, id, object string, values ...string) (ItemResult, error) {
	return in.itemAction(ctx, ActionRedrive, id, object, values)
}

// BuryItem moves the ready or delayed item id of a queue instance to its
// dead letters with reason (DefaultBuryReason when ""), keeping its
// delivery count. It changes nothing for an item in flight (Refused: its
// consumer settles it) or dead already, nor when no item has the id (Was
// ""). It returns the errors of RemoveItem.
func (in *Inspector) BuryItem(ctx context.Context, id, reason, object string, values ...string) (ItemResult, error) {
	if reason == "" {
		reason = DefaultBuryReason
	}
	return in.itemActionWhy(ctx, ActionBury, id, reason, object, values)
}

// RunItemNow makes the delayed item id of a queue instance ready now: it
// moves to the end of the ready list, as the delay timer moves a due item
// (a plain queue's item then has no id: its ready list holds bodies). It
// changes nothing for an item that is not delayed (Refused, or ready
// already), nor when no item has the id (Was ""). It returns the errors
// of RemoveItem.
func (in *Inspector) RunItemNow(ctx context.Context, id, object string, values ...string) (ItemResult, error) {
	return in.itemAction(ctx, ActionRunNow, id, object, values)
}

// ErrNoID: an item action without an id.
var ErrNoID = errors.New("inspect: an item action needs the item's id")

func (in *Inspector) itemAction(ctx context.Context, action, id, object string, values []string) (ItemResult, error) {
	return in.itemActionWhy(ctx, action, id, "", object, values)
}

func (in *Inspector) itemActionWhy(ctx context.Context, action, id, reason, object string, values []string) (ItemResult, error) {
	q, _, key, err := in.runtimeQueue(object, values)
	if err != nil {
		return ItemResult{}, err
	}
	r := ItemResult{Action: action, Key: key, ID: id}
	if id == "" {
		return r, fmt.Errorf("%w (%s of %s)", ErrNoID, action, key)
	}
	was, done, err := lockimpl.QueueItemAction(ctx, q, action, id, reason)
	if err != nil {
		return r, fmt.Errorf("inspect: %s item %s of %s: %w", action, id, key, err)
	}
	r.Was, r.Done = was, done
	return r, nil
}

// queueKey returns the key of a queue instance and whether the queue is
// reliable, or ErrUnknownObject, ErrBadParams, or ErrUnsupported for an
// object that is not a queue.
func (in *Inspector) queueKey(object string, values []string) (string, bool, error) {
	key, err := in.Key(object, values...)
	if err != nil {
		return "", false, err
	}
	o := in.byNm[object]
	q, ok := o.obj.(*spec.Queue)
	if !ok {
		return "", false, fmt.Errorf("%w: %s is a %s, not a queue", ErrUnsupported, o.name, o.kind)
	}
	return key, q.Reliable != nil, nil
}

// queueKeyList returns a queue's keys in the scripts' KEYS order: its key
// (the ready list), then queueSuffixes.
func queueKeyList(key string) []string {
	ks := []string{key}
	for _, s := range queueSuffixes {
		ks = append(ks, keys.Sub(key, s))
	}
	return ks
}

// Item finds the item id of a queue instance wherever it is, in one
// MULTI: its state, body and counters; State is "" when no item has the
// id. A plain queue's ready items have no id: they are not
// found. It returns ErrUnknownObject, ErrBadParams, ErrUnsupported for an
// object that is not a queue, or a Redis error.
func (in *Inspector) Item(ctx context.Context, id, object string, values ...string) (*QueueItem, error) {
	key, reliable, err := in.queueKey(object, values)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, fmt.Errorf("%w (of %s)", ErrNoID, key)
	}
	ks := queueKeyList(key)
	const (
		kReady, kDelayed, kData, kProc, kInflight, kAtt, kDead, kErr = 0, 1, 2, 5, 6, 7, 8, 9
	)
	var (
		now               *redis.TimeCmd
		due, deadline     *redis.FloatCmd
		proc, ready, dead *redis.IntCmd
		body, att, reason *redis.StringCmd
	)
	_, err = in.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		due = p.ZScore(ctx, ks[kDelayed], id)
		deadline = p.ZScore(ctx, ks[kInflight], id)
		if reliable {
			proc = p.LPos(ctx, ks[kProc], id, redis.LPosArgs{})
			ready = p.LPos(ctx, ks[kReady], id, redis.LPosArgs{})
		}
		dead = p.LPos(ctx, ks[kDead], id, redis.LPosArgs{})
		body = p.HGet(ctx, ks[kData], id)
		att = p.HGet(ctx, ks[kAtt], id)
		reason = p.HGet(ctx, ks[kErr], id)
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("inspect: reading item %s of %s: %w", id, key, err)
	}
	nowMs := now.Val().UnixMilli()
	it := queueItem(id, "", body.Val(), atoiAny(att.Val()))
	found := func(c interface{ Err() error }) bool { return c != nil && c.Err() == nil }
	switch {
	case found(due):
		d := int64(max0(int(int64(due.Val()) - nowMs)))
		it.State, it.DueMs = ItemDelayed, &d
	case found(deadline):
		d := int64(deadline.Val()) - nowMs
		it.State, it.DeadlineMs = ItemInFlight, &d
	case found(proc):
		it.State = ItemInFlight // claimed by a Take that has not started it
	case found(ready):
		it.State = ItemReady
	case found(dead):
		it.State, it.Reason = ItemDead, reason.Val()
	default:
		return &QueueItem{ID: id}, nil
	}
	return &it, nil
}
