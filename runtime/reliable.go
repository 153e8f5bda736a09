package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

// ReliableQueue is a queue of T with acknowledged delivery (at least
// once): Take returns a Delivery, hidden from other consumers for the
// spec's visibility timeout; Ack ends it, and a delivery neither
// acknowledged nor extended in time is delivered again. After the spec's
// maxDeliveries deliveries an item goes to the dead-letter list, where it
// can be inspected and re-driven.
//
// Take claims with one script call (the take script); when there is
// nothing to claim, the same call registers it as a waiting consumer, and
// it waits holding no connection of the go-redis pool until an offer (or
// the delay timer) wakes it (see "Queues" in docs/design.md).
type ReliableQueue[T any] struct {
	q     *queue
	codec Codec[T]
}

// makeReliableQueue returns the reliable queue with the given definition
// (emitted by lockgen), codec and key. It does not contact Redis.
func makeReliableQueue[T any](c *Client, def *impl.QueueDef, codec Codec[T], key string) *ReliableQueue[T] {
	return &ReliableQueue[T]{q: newQueue(c, def, key), codec: codec}
}

// Key returns the queue's Redis key (its ready list).
func (q *ReliableQueue[T]) Key() string { return q.q.key }

// Name returns the queue's name in the spec.
func (q *ReliableQueue[T]) Name() string { return q.q.def.Name }

// Offer appends v to the queue and returns its id, the one its
// deliveries have (Delivery.ID) and RemoveID takes. It returns an encoding
// error, ErrItemTooLarge, ErrClosed, or a Redis error.
func (q *ReliableQueue[T]) Offer(ctx context.Context, v T) (string, error) {
	return offerOne(ctx, q.q, q.codec, v, 0, time.Time{})
}

// OfferMany appends vs to the queue, in order, in one round trip, and
// returns their ids. It returns an encoding error, ErrItemTooLarge, ErrClosed, or a Redis
// error.
func (q *ReliableQueue[T]) OfferMany(ctx context.Context, vs ...T) ([]string, error) {
	bodies, err := encodeAll(q.q, q.codec, vs)
	if err != nil {
		return nil, err
	}
	id, err := q.q.offerKey(ctx, 0, time.Time{}, "", 0, bodies...)
	if err != nil || len(bodies) == 0 {
		return nil, err
	}
	return itemIDs(id, len(bodies)), nil
}

// OfferOption changes one Enqueue.
type OfferOption func(*offerOptions)

type offerOptions struct {
	delay      time.Duration
	at         time.Time
	key        string
	window     time.Duration
	specWindow bool // Dedupe: the spec's window
}

// After makes an enqueued item due after d (a delayed queue's; 0: ready
// now).
func After(d time.Duration) OfferOption { return func(o *offerOptions) { o.delay = d } }

// At makes an enqueued item due at t (a delayed queue's; a time not in
// the future: ready now).
func At(t time.Time) OfferOption { return func(o *offerOptions) { o.at = t } }

// WithKey deduplicates an Enqueue: while an item enqueued with the same
// key was enqueued less than window ago, Enqueue adds nothing and returns
// that item's id (asynq's TaskID and Unique). The key is kept in Redis
// for window.
func WithKey(key string, window time.Duration) OfferOption {
	return func(o *offerOptions) { o.key, o.window = key, window }
}

// Dedupe is Unique, by its first name: WithKey with the window of the
// queue's spec (unique: 1h, or reliable: { dedupe: 1h }); Enqueue returns
// ErrInvalidArgument when the spec has none.
func Dedupe(key string) OfferOption {
	return func(o *offerOptions) { o.key, o.window, o.specWindow = key, 0, true }
}

// Enqueue adds v, ready now unless After or At say when (a delayed
// queue's; they are ignored by a queue without delay), and returns its
// id, the one its deliveries have (Delivery.ID) and RemoveID takes. Like
// every offer it adds v once although its command ran twice (a reply
// lost). It returns ErrInvalidArgument for a negative delay, an empty
// key or a window under a millisecond, Unique (Dedupe) on a queue whose
// spec has no unique window, an encoding error, ErrItemTooLarge, ErrClosed, or a Redis error.
func (q *ReliableQueue[T]) Enqueue(ctx context.Context, v T, opts ...OfferOption) (string, error) {
	var o offerOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.specWindow {
		if o.window = q.q.def.Dedupe; o.window == 0 {
			return "", fmt.Errorf("%w: Dedupe(%q): queue %s has no unique window in its spec (unique: ...); use WithKey", ErrInvalidArgument, o.key, q.q.def.Name)
		}
	}
	switch {
	case o.delay < 0:
		return "", fmt.Errorf("%w: negative delay %v", ErrInvalidArgument, o.delay)
	case o.window != 0 && o.key == "", o.key != "" && o.window < time.Millisecond:
		return "", fmt.Errorf("%w: dedupe key %q with window %v", ErrInvalidArgument, o.key, o.window)
	}
	if !q.q.def.Delay {
		o.delay, o.at = 0, time.Time{}
	}
	bodies, err := encodeAll(q.q, q.codec, []T{v})
	if err != nil {
		return "", err
	}
	return q.q.offerKey(ctx, o.delay, o.at, o.key, o.window, bodies...)
}

// RemoveID removes the item with the given id (Enqueue's, Delivery.ID's)
// while it is ready, delayed, or dead (not while a delivery of it is in
// flight), and reports whether it was there. It is two round trips (a
// MULTI taking it off the lists, then its body and counters), and removes
// nothing more when it runs twice: a MULTI sent again (its reply lost)
// that finds the item gone reports it removed, by this call. It returns a
// Redis error.
func (q *ReliableQueue[T]) RemoveID(ctx context.Context, id string) (bool, error) {
	k := q.q.keys
	var ready, delayed, dead *redis.IntCmd
	arg := rdb.NewCounted(id) // its sends: a MULTI sent again may find it gone
	send := func() *redis.Cmd {
		cmd := redis.NewCmd(ctx)
		_, err := q.q.c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			ready = p.LRem(ctx, k[kReady], 1, arg)
			delayed = p.ZRem(ctx, k[kDelayed], id)
			dead = p.LRem(ctx, k[kDead], 1, id)
			return nil
		})
		cmd.SetErr(err)
		return cmd
	}
	// go-redis does not send a MULTI again when its reply was lost:
	// resolve does, while ctx allows.
	err := resolve(ctx, send(), send).Err()
	if err != nil {
		return false, fmt.Errorf("lockgen: removing %s from %s: %w", id, q.q.key, err)
	}
	if ready.Val()+delayed.Val()+dead.Val() == 0 && arg.Sends() <= 1 {
		return false, nil
	}
	_, err = q.q.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, k[kData], id)
		p.HDel(ctx, k[kAtt], id)
		p.HDel(ctx, k[kErr], id)
		return nil
	})
	if err != nil {
		return true, fmt.Errorf("lockgen: removing %s from %s: %w", id, q.q.key, err)
	}
	return true, nil
}

// Take returns the next delivery, waiting for one as long as the context
// allows. An item that does not decode is dead-lettered with the decode
// error, and Take goes on with the next one.
//
// It returns ErrEmpty when the context ended the wait (also matching the
// context's error), ErrClosed, or a Redis error.
func (q *ReliableQueue[T]) Take(ctx context.Context) (*Delivery[T], error) {
	ds, err := q.take(ctx, -1, 1)
	if err != nil {
		return nil, err
	}
	return ds[0], nil
}

// TryTake is Take waiting at most wait (0: no wait). It returns the errors
// Take returns, ErrEmpty when the wait ran out, and ErrInvalidArgument for
// a negative wait.
func (q *ReliableQueue[T]) TryTake(ctx context.Context, wait time.Duration) (*Delivery[T], error) {
	if wait < 0 {
		return nil, fmt.Errorf("%w: negative wait %v", ErrInvalidArgument, wait)
	}
	ds, err := q.take(ctx, wait, 1)
	if err != nil {
		return nil, err
	}
	return ds[0], nil
}

// TakeN returns up to n deliveries, first ready first, waiting as long as
// the context allows until at least one item is ready. Every delivery is
// in flight with the same visibility deadline, and is settled on its own
// (Ack, Nack, ...). It is one round trip when an item is ready (and one
// more per wake-up when it had to wait). Items that do not decode
// are dead-lettered as by Take.
//
// It returns ErrInvalidArgument for n < 1, and the errors of Take.
func (q *ReliableQueue[T]) TakeN(ctx context.Context, n int) ([]*Delivery[T], error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: take %d", ErrInvalidArgument, n)
	}
	return q.take(ctx, -1, n)
}

// TryTakeN is TakeN waiting at most wait (0: no wait). It returns the
// errors TakeN returns, ErrEmpty when the wait ran out, and
// ErrInvalidArgument for a negative wait.
func (q *ReliableQueue[T]) TryTakeN(ctx context.Context, n int, wait time.Duration) ([]*Delivery[T], error) {
	if n < 1 || wait < 0 {
		return nil, fmt.Errorf("%w: take %d, wait %v", ErrInvalidArgument, n, wait)
	}
	return q.take(ctx, wait, n)
}

func (q *ReliableQueue[T]) take(ctx context.Context, wait time.Duration, n int) (out []*Delivery[T], err error) {
	ctx, obsEnd := q.q.c.start(ctx, OpTake, q.q.def.Name)
	defer func() { q.q.c.observeTake(ctx, obsEnd, q.q.def.Name, len(out), err) }()
	e := q.q.serve(true)
	defer q.q.done(e)
	end := waitEnd(ctx, wait)
	for {
		if ctx.Err() != nil {
			// Claims are not cut short by ctx (see claim): an ended
			// context must not start one.
			return nil, emptyError(ctx)
		}
		cend := end // a claim ends with the wait, unless it is a try without one
		if wait == 0 {
			cend = time.Time{}
		}
		var ds []*delivery
		if wait == 0 {
			ds, err = q.q.claimAgain(ctx, cend, false, "", n, "", false)
		} else {
			// A waiting take registers as a waiting consumer when it
			// claims nothing, and sleeps holding no pool connection
			// (see await).
			err = q.q.await(ctx, end, func(owner string, registered bool) (bool, time.Duration, error) {
				if err := q.q.c.checkOpen(); err != nil {
					return false, 0, err
				}
				var err error
				ds, err = q.q.claimAgain(ctx, cend, true, "", n, owner, registered)
				// (Registered: its client refreshes the entry, see
				// takerRefresher.)
				return len(ds) > 0, groupedSleep, err
			})
		}
		if err != nil {
			return nil, err
		}
		var buryErr error
		for _, d := range ds {
			v, err := decodeItem(q.codec, d.body)
			if err == nil {
				q.q.c.extractItem(ctx, d.body)
				out = append(out, &Delivery[T]{Value: v, d: d})
				continue
			}
			if err := d.settle(ctx, "decode: "+err.Error(), settleDead, 0); err != nil && !errors.Is(err, ErrDeliveryExpired) && buryErr == nil {
				buryErr = err // the item stays in flight and comes back
			}
		}
		switch {
		case len(out) > 0:
			q.q.c.sched.Expect(e, out[0].d.getDeadline())
			return out, nil
		case buryErr != nil:
			return nil, buryErr
		case len(ds) > 0: // only items that do not decode: take again
			continue
		case wait == 0:
			return nil, ErrEmpty
		}
	}
}

// delivery is the untyped part of a Delivery.
type delivery struct {
	q    *queue
	id   string
	n    int64
	body []byte

	mu       sync.Mutex
	deadline time.Time

	// smu serializes the calls that settle or extend the delivery, so
	// that settled is known before the next one runs.
	smu     sync.Mutex
	settled byte // 0 in flight as far as we know, 'a' acknowledged, 'g' given back
}

// settledError is the error of a call on a delivery this program settled
// already: nil for an Ack of an acknowledged one (it is done, as asked),
// ErrDeliverySettled otherwise. The caller holds smu.
func (d *delivery) settledError(ack bool) (bool, error) {
	switch {
	case d.settled == 0:
		return false, nil
	case ack && d.settled == 'a':
		return true, nil
	}
	what := "acknowledged"
	if d.settled == 'g' {
		what = "given back"
	}
	return true, fmt.Errorf("%w: delivery %s of %s was %s", ErrDeliverySettled, d.id, d.q.key, what)
}

// claimAgain is claim, sent again as the same operation while it fails
// with a transient error (Redis unreachable, or no reply after go-redis'
// retries), when the caller waits (wait) and end (zero: none) allows: a
// run that happened answers its deliveries (see queue_take's record), so
// a Take rides an outage out, as every other blocking call does, and
// finds what a lost reply claimed.
func (q *queue) claimAgain(ctx context.Context, end time.Time, wait bool, id string, n int, owner string, registered bool) ([]*delivery, error) {
	op := &rdb.Marked{S: q.c.newSharedOp()}
	for retries := 0; ; retries++ {
		ds, err := q.claim(ctx, end, id, n, op, owner, registered)
		if err == nil || !transient(err) || !wait {
			return ds, err
		}
		d := retryBackoff(retries)
		if !end.IsZero() && time.Until(end) < d {
			return nil, err
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, lastError(emptyError(ctx), err)
		case <-q.c.hub.Closed():
			t.Stop()
			return nil, ErrClosed
		}
	}
}

// claim runs the take script as operation op: it claims up to n
// deliveries, id first (when not "", from the processing list), then the
// first ready items. It returns none when there was nothing to claim;
// with an owner, it then registered owner as a waiting consumer
// (registered: owner may be registered already, see rdb.Queue.Take).
func (q *queue) claim(ctx context.Context, end time.Time, id string, n int, op *rdb.Marked, owner string, registered bool) ([]*delivery, error) {
	if err := q.c.checkOpen(); err != nil {
		return nil, err
	}
	// Bounded by the deadline (and the wait), not cut short by a
	// cancellation: a claim that ran while its reply was abandoned hides
	// its items until their visibility runs out.
	// queue_take reply: nil | {int, int, any...}
	if dl, ok := ctx.Deadline(); ok && (end.IsZero() || dl.Before(end)) {
		end = dl
	}
	uctx, cancel := attemptContext(context.WithoutCancel(ctx), true, end)
	defer cancel()
	claim := func() *redis.Cmd {
		return q.ops().Take(uctx, id, n, op, owner, registered)
	}
	var cmd *redis.Cmd
	if _, bounded := uctx.Deadline(); bounded {
		// A claim the deadline cut short may have run: its deliveries
		// come back when their visibility runs out.
		var ok bool
		if cmd, ok = within(uctx, claim); !ok {
			cmd = lateCmd(uctx)
		}
	} else {
		cmd = claim()
	}
	res, err := cmd.Slice()
	received := time.Now()
	switch {
	case isNil(err):
		return nil, nil
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		// The wait (or the caller's context) ended before the claim's
		// reply: nothing was taken, as far as the caller is concerned
		// (what the claim may have taken comes back after its
		// visibility), as when the wait ends with the queue empty.
		return nil, emptyTaking(ctx, q.key)
	case err != nil:
		return nil, fmt.Errorf("lockgen: taking from %s: %w", q.key, err)
	case len(res) < 5 || (len(res)-2)%3 != 0:
		return nil, fmt.Errorf("lockgen: taking from %s: unexpected reply %v", q.key, res)
	}
	deadline, _ := res[0].(int64)
	now, _ := res[1].(int64)
	local := received.Add(time.Duration(deadline-now) * time.Millisecond)
	ds := make([]*delivery, 0, (len(res)-2)/3)
	for i := 2; i+2 < len(res); i += 3 {
		d := &delivery{q: q, deadline: local}
		d.id, _ = res[i].(string)
		body, _ := res[i+1].(string)
		d.body = []byte(body)
		d.n, _ = res[i+2].(int64)
		ds = append(ds, d)
	}
	return ds, nil
}

// How settle gives a delivery back (the nack script's flag).
const (
	settleAgain = "0" // deliver again (after delay), or dead-letter after max deliveries
	settleDead  = "1" // dead-letter now
	settleBack  = "b" // back at the head of the queue, this delivery not counted
)

// settle gives the delivery back as mode says, with reason recorded. Like
// every release, it completes although ctx was cancelled (see
// ReleaseTimeout).
func (d *delivery) settle(ctx context.Context, reason, mode string, delay time.Duration) error {
	d.smu.Lock()
	defer d.smu.Unlock()
	if done, err := d.settledError(false); done {
		return err
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	q := d.q
	// queue_nack reply: int
	id := rdb.NewCounted(d.id)
	send := func() *redis.Cmd {
		return q.ops().Nack(ctx, id, d.n, reason, mode, delay)
	}
	n, err := resolve(ctx, send(), send).Int()
	switch {
	case err != nil:
		return fmt.Errorf("lockgen: giving back delivery %s of %s: %w", d.id, q.key, err)
	case n == 0 && !rdb.Resent(id):
		return ErrDeliveryExpired
	case n == 0: // an earlier run of this call gave it back (see rdb.SendCounter)
		if delay > 0 {
			q.c.sched.Expect(q.serve(false), time.Now().Add(delay))
		}
		n = 1
	case n == 3:
		q.c.sched.Expect(q.serve(false), time.Now().Add(delay))
	}
	d.settled = 'g'
	q.c.observe(ctx, Event{Kind: settled(n), Object: q.def.Name, Err: errors.New(reason)})
	return nil
}

// Delivery is one delivery of an item of a reliable queue, returned by
// Take. Until it is acknowledged (Ack), given back (Nack) or its
// visibility timeout runs out, no other consumer gets the item. A
// Delivery is safe for concurrent use.
type Delivery[T any] struct {
	Value T
	d     *delivery
}

// ID returns the item's id, unique in its queue; it stays the same across
// redeliveries.
func (d *Delivery[T]) ID() string { return d.d.id }

// Attempt returns which delivery of the item this is: 1 for the first.
func (d *Delivery[T]) Attempt() int { return int(d.d.n) }

// Deadline returns when the visibility timeout runs out, on the local
// clock (measured from the server's clock at the claim).
func (d *Delivery[T]) Deadline() time.Time { return d.d.getDeadline() }

func (d *delivery) getDeadline() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deadline
}

// Ack acknowledges the delivery: the item is done and deleted. A second
// Ack of a delivery this Delivery acknowledged does nothing and returns
// nil (without contacting Redis). It returns ErrDeliveryExpired when the
// delivery is no longer in flight (its visibility timeout ran out and a
// timer gave the item back), ErrDeliverySettled when it was given back
// (Nack, Retry, Bury, Release), or a Redis error. It completes although
// ctx was cancelled: it keeps ctx's values only, and gives up after
// ReleaseTimeout.
func (d *Delivery[T]) Ack(ctx context.Context) error { return d.d.ack(ctx) }

func (d *delivery) ack(ctx context.Context) error {
	d.smu.Lock()
	defer d.smu.Unlock()
	if done, err := d.settledError(true); done {
		return err
	}
	return d.ackLocked(ctx)
}

// ackLocked is ack of a delivery not settled, with smu held.
func (d *delivery) ackLocked(ctx context.Context) error {
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	q := d.q
	// queue_ack reply: int | {int...} (int: one delivery)
	id := rdb.NewCounted(d.id)
	send := func() *redis.Cmd { return q.ops().Ack(ctx, id, d.n) }
	n, err := resolve(ctx, send(), send).Int()
	switch {
	case err != nil:
		return fmt.Errorf("lockgen: acknowledging delivery %s of %s: %w", d.id, q.key, err)
	case n == 0 && !rdb.Resent(id): // else an earlier run of this call acknowledged it (see rdb.SendCounter)
		return ErrDeliveryExpired
	}
	d.settled = 'a'
	q.c.observe(ctx, Event{Kind: EventAcked, Object: q.def.Name})
	return nil
}

// Nack gives the item back at once: it is queued again at the end of the
// queue, or dead-lettered with reason when this was its last allowed
// delivery. A nil reason is recorded as "nack". It returns
// ErrDeliveryExpired when the delivery is no longer in flight,
// ErrDeliverySettled when this Delivery was settled already, or a Redis
// error. Like Ack, it completes although ctx was cancelled.
func (d *Delivery[T]) Nack(ctx context.Context, reason error) error { return d.d.nack(ctx, reason) }

func (d *delivery) nack(ctx context.Context, reason error) error {
	return d.settle(ctx, reasonText(reason), settleAgain, 0)
}

func reasonText(reason error) string {
	if reason == nil {
		return "nack"
	}
	return reason.Error()
}

// Retry gives the item back to be delivered again after delay (on the
// server's clock), or dead-letters it with reason when this was its last
// allowed delivery; a delay of 0 is Nack. A nil reason is recorded as
// "nack". It returns ErrInvalidArgument for a negative delay,
// ErrDeliveryExpired when the delivery is no longer in flight,
// ErrDeliverySettled when this Delivery was settled already, or a Redis
// error.
func (d *Delivery[T]) Retry(ctx context.Context, reason error, delay time.Duration) error {
	if err := checkDelay(delay); err != nil {
		return err
	}
	return d.d.settle(ctx, reasonText(reason), settleAgain, delay)
}

// Bury dead-letters the item at once with reason, however many
// deliveries it has left. A nil reason is recorded as "nack". It returns
// ErrDeliveryExpired when the delivery is no longer in flight,
// ErrDeliverySettled when this Delivery was settled already, or a Redis
// error.
func (d *Delivery[T]) Bury(ctx context.Context, reason error) error {
	return d.d.settle(ctx, reasonText(reason), settleDead, 0)
}

// Release puts the item back at the head of the queue without counting
// this delivery, as if it had not been taken: for a consumer that stops
// before it started the work. It returns ErrDeliveryExpired when the
// delivery is no longer in flight, ErrDeliverySettled when this Delivery
// was settled already, or a Redis error.
func (d *Delivery[T]) Release(ctx context.Context) error {
	return d.d.settle(ctx, "", settleBack, 0)
}

// Extend moves the visibility deadline to visibility from now (on the
// server's clock), for work that takes longer than the spec's timeout. It
// returns ErrInvalidArgument for a visibility under a millisecond,
// ErrDeliveryExpired when the delivery is no longer in flight,
// ErrDeliverySettled when this Delivery was settled already, or a Redis
// error.
func (d *Delivery[T]) Extend(ctx context.Context, visibility time.Duration) error {
	return d.d.extend(ctx, visibility)
}

func (d *delivery) extend(ctx context.Context, visibility time.Duration) error {
	if visibility < time.Millisecond {
		return fmt.Errorf("%w: visibility %v", ErrInvalidArgument, visibility)
	}
	d.smu.Lock()
	defer d.smu.Unlock()
	if done, err := d.settledError(false); done {
		return err
	}
	q := d.q
	// queue_extend reply: {int, int} | nil
	res, err := q.ops().Extend(ctx, d.id, d.n, visibility).Int64Slice()
	received := time.Now()
	switch {
	case isNil(err):
		return ErrDeliveryExpired
	case err != nil:
		return fmt.Errorf("lockgen: extending delivery %s of %s: %w", d.id, q.key, err)
	case len(res) != 2:
		return fmt.Errorf("lockgen: extending delivery %s of %s: unexpected reply %v", d.id, q.key, res)
	}
	d.mu.Lock()
	d.deadline = received.Add(time.Duration(res[0]-res[1]) * time.Millisecond)
	d.mu.Unlock()
	return nil
}

// Peek returns the first ready item without taking it (no delivery
// starts). It returns ErrEmpty when no item is ready, the decode error of
// an item that does not decode (Take dead-letters it), ErrClosed, or a
// Redis error. One round trip.
func (q *ReliableQueue[T]) Peek(ctx context.Context) (T, error) { return peekOne(ctx, q.q, q.codec) }

// PeekN returns up to n ready items, first ready first, without taking
// them, in one round trip. It returns ErrInvalidArgument for n < 1, the
// items before one that does not decode with its decode error, ErrClosed,
// or a Redis error.
func (q *ReliableQueue[T]) PeekN(ctx context.Context, n int) ([]T, error) {
	return peekN(ctx, q.q, q.codec, n)
}

// Remove removes one item equal to v, the first ready one, or else the
// delayed one due first, and reports whether there was one. Items are
// equal when the codec encodes them to the same bytes. Deliveries in
// flight and dead letters are not removed. It reads the queue in Redis
// until it finds one (O(N) for a long queue), in one round trip. It
// returns an encoding error, ErrClosed, or a Redis error.
func (q *ReliableQueue[T]) Remove(ctx context.Context, v T) (bool, error) {
	n, err := removeItems(ctx, q.q, q.codec, v, 1)
	return n > 0, err
}

// RemoveAll removes every ready and delayed item equal to v (see Remove)
// and returns how many it removed, in one round trip that reads every
// ready and delayed item. It returns the errors of Remove.
func (q *ReliableQueue[T]) RemoveAll(ctx context.Context, v T) (int, error) {
	return removeItems(ctx, q.q, q.codec, v, 0)
}

// Drain removes and returns every item ready when it starts, first ready
// first, as Redisson's drainTo does: the items leave the queue for good
// (at most once: no delivery starts, nothing is acknowledged; use TakeN
// for deliveries), one round trip per 1000 items. Delayed items,
// deliveries in flight and dead letters stay. Items that do not decode
// are dead-lettered. It returns ErrClosed, or a Redis error with the
// items drained before it.
func (q *ReliableQueue[T]) Drain(ctx context.Context) ([]T, error) { return drain(ctx, q.q, q.codec) }

// Len returns the number of items ready to take, or a Redis error.
func (q *ReliableQueue[T]) Len(ctx context.Context) (int64, error) { return q.q.len(ctx) }

// Stats counts the queue's items in one round trip, or returns a Redis
// error.
func (q *ReliableQueue[T]) Stats(ctx context.Context) (QueueStats, error) { return q.q.stats(ctx) }

// DeadLetters returns the n oldest dead letters, or ErrInvalidArgument
// for n <= 0, or a Redis error.
func (q *ReliableQueue[T]) DeadLetters(ctx context.Context, n int) ([]DeadLetter[T], error) {
	return deadLetters(ctx, q.q, q.codec, n)
}

// Redrive puts up to n of the oldest dead letters back at the end of the
// queue, with their delivery count reset, and returns how many it moved.
// It returns ErrInvalidArgument for n <= 0, or a Redis error with the
// number moved before it.
func (q *ReliableQueue[T]) Redrive(ctx context.Context, n int) (int, error) {
	return q.q.redrive(ctx, n)
}

// Start starts this client's delay timer of the queue, which redelivers
// items whose visibility timeout ran out, and waits until it has moved
// everything already due, such as deliveries of consumers that died. The
// first Offer or Take starts the timer too, without waiting. It returns
// the context's error, ErrClosed, or the first move's Redis error (the
// timer keeps retrying).
func (q *ReliableQueue[T]) Start(ctx context.Context) error { return q.q.start(ctx) }

// DelayedReliableQueue is a reliable queue whose items may be offered
// with a delay.
type DelayedReliableQueue[T any] struct {
	*ReliableQueue[T]
}

// makeDelayedReliableQueue returns the delayed reliable queue with the
// given definition, codec and key. It does not contact Redis.
func makeDelayedReliableQueue[T any](c *Client, def *impl.QueueDef, codec Codec[T], key string) *DelayedReliableQueue[T] {
	return &DelayedReliableQueue[T]{makeReliableQueue(c, def, codec, key)}
}

// PeekDelayed returns up to n items not ready yet (offered with a delay,
// or given back with one by Retry or a worker's backoff), due first
// first, with their due times and ids, without changing anything
// (Redisson's RDelayedQueue.peek, for n items). Items due already that no
// delay timer has moved yet are among them (their Due is past). It is one
// round trip (a read-only script, one consistent view) and returns
// ErrInvalidArgument for n < 1, the items before one that does not decode
// with its decode error, ErrClosed, or a Redis error.
func (q *DelayedReliableQueue[T]) PeekDelayed(ctx context.Context, n int) ([]DelayedItem[T], error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: peek %d", ErrInvalidArgument, n)
	}
	return delayedItems(ctx, q.q, q.codec, n)
}

// ReadDelayed returns every item not ready yet, as PeekDelayed does
// (Redisson's RDelayedQueue.readAll). It reads them all in one round trip:
// O(N) in Redis and in memory. It returns the errors of PeekDelayed.
func (q *DelayedReliableQueue[T]) ReadDelayed(ctx context.Context) ([]DelayedItem[T], error) {
	return delayedItems(ctx, q.q, q.codec, 0)
}

// ContainsDelayed reports whether an item not ready yet equals v
// (Redisson's RDelayedQueue.contains): equal as Remove compares, by the
// codec's bytes. It reads the delayed items in Redis until it finds one,
// in one round trip (a read-only script: O(N)), and changes nothing. It
// returns an encoding error, ErrClosed, or a Redis error.
func (q *DelayedReliableQueue[T]) ContainsDelayed(ctx context.Context, v T) (bool, error) {
	return containsDelayed(ctx, q.q, q.codec, v)
}

// OfferIn adds v, due after delay, as measured by the Redis server's
// clock (0 makes it ready now), and returns its id. It returns
// ErrInvalidArgument for a negative delay, an encoding error, ErrItemTooLarge, ErrClosed,
// or a Redis error.
func (q *DelayedReliableQueue[T]) OfferIn(ctx context.Context, v T, delay time.Duration) (string, error) {
	if err := checkDelay(delay); err != nil {
		return "", err
	}
	return offerOne(ctx, q.q, q.codec, v, delay, time.Time{})
}

// OfferAt adds v, due at t on the Redis server's clock (a time already
// past makes it ready now), and returns its id. It returns
// ErrInvalidArgument for the zero time, an encoding error, ErrItemTooLarge, ErrClosed, or
// a Redis error.
func (q *DelayedReliableQueue[T]) OfferAt(ctx context.Context, v T, t time.Time) (string, error) {
	if err := checkAt(t); err != nil {
		return "", err
	}
	return offerOne(ctx, q.q, q.codec, v, 0, t)
}

// isNil reports whether err is Redis' nil reply.
func isNil(err error) bool { return errors.Is(err, redis.Nil) }
