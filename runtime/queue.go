package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/delay"
	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

func init() {
	impl.SetUpQueue = func(q, c any, def *impl.QueueDef, codec any, key string) {
		q.(queueSetUp).setUp(c.(*Client), def, codec, key)
	}
}

// queueSetUp is implemented by *Queue[T] and *ReliableQueue[T] for every T.
type queueSetUp interface {
	setUp(c *Client, def *impl.QueueDef, codec any, key string)
}

func (q *Queue[T]) setUp(c *Client, def *impl.QueueDef, codec any, key string) {
	*q = *makeQueue(c, def, codec.(Codec[T]), key)
}

func (q *ReliableQueue[T]) setUp(c *Client, def *impl.QueueDef, codec any, key string) {
	*q = *makeReliableQueue(c, def, codec.(Codec[T]), key)
}

// Queue errors.
var (
	// ErrEmpty: nothing could be taken from a queue within the wait. When
	// the caller's context ended the wait, the error also matches that
	// context's error.
	ErrEmpty = errors.New("lockgen: queue empty")

	// ErrDeliveryExpired: an Ack, Nack or Extend of a delivery that is no
	// longer in flight: its visibility timeout ran out and a delay timer
	// gave the item back (it may be redelivered or dead-lettered), or it
	// was acknowledged or given back already.
	ErrDeliveryExpired = errors.New("lockgen: delivery no longer in flight")

	// ErrDeliverySettled: a Nack, Retry, Bury, Release or Extend of a
	// delivery this program already settled (acknowledged or gave back),
	// or an Ack of one it gave back. Redis was not contacted. (A second
	// Ack of an acknowledged delivery is not an error: it does nothing.)
	ErrDeliverySettled = errors.New("lockgen: delivery already settled")

	// ErrItemTooLarge: an offer (Offer, OfferMany, OfferIn, OfferAt,
	// Enqueue) of an item whose encoded size is above the client's limit
	// (WithMaxItemSize; DefaultMaxItemSize, Redis' proto-max-bulk-len, by
	// default). The error names the size and the limit; nothing was sent,
	// so no item of the call was added.
	ErrItemTooLarge = errors.New("lockgen: queue item too large")
)

// queueKeys are the suffixes of a queue's keys after its own key, the ready
// list, in the scripts' KEYS order.
var queueKeys = [...]string{"delayed", "data", "seq", "armed", "proc", "inflight", "att", "dead", "err", "takers"}

// Indexes in queue.keys.
const (
	kReady = iota
	kDelayed
	kData
	kSeq
	kArmed
	kProc
	kInflight
	kAtt
	kDead
	kErr
	kTakers
)

// queue is what every queue type is built on: one queue instance, its
// keys and definition, and the untyped operations.
type queue struct {
	c    *Client
	def  *impl.QueueDef
	key  string
	keys []string
	ch   string
	// offset is the server's clock minus this process's (ns), as the
	// last reply of Move showed it, and 0 before one (DueAt).
	offset atomic.Int64
}

func newQueue(c *Client, def *impl.QueueDef, key string) *queue {
	q := &queue{c: c, def: def, key: key, keys: make([]string, 0, len(queueKeys)+1), ch: keys.Sub(key, "ch")}
	q.keys = append(q.keys, key)
	for _, s := range queueKeys {
		q.keys = append(q.keys, keys.Sub(key, s))
	}
	return q
}

func (q *queue) mode() string {
	if q.def.Reliable {
		return "r"
	}
	return "p"
}

// needsTimer reports whether the queue has due times: delayed items or
// visibility deadlines.
func (q *queue) needsTimer() bool { return q.def.Delay || q.def.Reliable }

// serve makes the client's delay scheduler serve the queue, if it has due
// times; with use, until the caller calls q.done with the result (a Take
// waiting on it).
func (q *queue) serve(use bool) *delay.Served {
	if !q.needsTimer() {
		return nil
	}
	return q.c.sched.Serve(q, use)
}

// done ends a use taken by serve.
func (q *queue) done(e *delay.Served) {
	if e != nil {
		q.c.sched.Done(e)
	}
}

// start serves the queue and waits until the scheduler has moved what was
// due when it started.
func (q *queue) start(ctx context.Context) error {
	if err := q.c.checkOpen(); err != nil {
		return err
	}
	e := q.serve(false)
	if e == nil {
		return nil
	}
	select {
	case <-e.Ready():
		return e.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// offer adds encoded items: ready now when delay and at are zero, else
// due after delay or at at. It is offerKey without a dedupe key.
func (q *queue) offer(ctx context.Context, delay time.Duration, at time.Time, bodies ...[]byte) error {
	_, err := q.offerKey(ctx, delay, at, "", 0, bodies...)
	return err
}

// offerKey is offer under a dedupe key (none when ""): an offer whose key
// was offered within window adds nothing. It returns the first item's
// id: the first offer's, when the key was offered already ("" for a
// plain queue's items ready now, which have no id).
func (q *queue) offerKey(ctx context.Context, delay time.Duration, at time.Time, key string, window time.Duration, bodies ...[]byte) (id string, err error) {
	ctx, end := q.c.start(ctx, OpOffer, q.def.Name)
	defer func() { q.c.observeOffer(ctx, end, q.def.Name, len(bodies), err) }()
	if err := q.c.checkOpen(); err != nil {
		return "", err
	}
	if len(bodies) == 0 {
		return "", nil
	}
	q.c.injectItems(ctx, bodies)
	if key != "" {
		markUnique(bodies, key) // the item shows its key (queueunique.go)
	}
	if err := q.c.checkItemSizes(q.key, bodies); err != nil {
		return "", err
	}
	if !at.IsZero() && !at.After(time.Now()) {
		at = time.Time{} // not in the future: ready now
	}
	op, ops := q.c.newSharedOp(), q.ops()
	record, recordFor := ops.OpRecord(op), OfferRecordTTL
	if key != "" {
		record, recordFor = ops.KeyRecord(key), window
	}
	send := func() *redis.Cmd { return ops.Offer(ctx, delay, at, op, record, recordFor, bodies) }
	cmd := send()
	if rdb.IsConnError(cmd.Err()) && ctx.Err() == nil {
		// No reply after go-redis' retries: the offer may have landed.
		// The same offer again answers from its record (see resolve).
		rctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
		defer cancel()
		cmd = resolve(rctx, cmd, send)
	}
	// queue_offer reply: {int, string}
	res, err := cmd.Slice()
	if err != nil {
		return "", fmt.Errorf("lockgen: offering to %s: %w", q.key, err)
	}
	if len(res) == 2 {
		id, _ = res[1].(string)
	}
	// The scheduler serves the queue until the items are due (another
	// client's may move them first).
	switch {
	case delay > 0:
		q.c.sched.Expect(q.serve(false), time.Now().Add(delay))
	case !at.IsZero():
		q.c.sched.Expect(q.serve(false), at)
	}
	return id, nil
}

// checkItemSizes returns ErrItemTooLarge, naming the size and the limit,
// for the first of bodies above the client's limit.
func (c *Client) checkItemSizes(key string, bodies [][]byte) error {
	for i, b := range bodies {
		if int64(len(b)) > c.maxItem {
			return fmt.Errorf("%w: item %d of the offer to %s is %d bytes encoded, the limit is %d (WithMaxItemSize)",
				ErrItemTooLarge, i+1, key, len(b), c.maxItem)
		}
	}
	return nil
}

// OfferRecordTTL is how long an offer's record lives in Redis (see
// queue_offer): a run of the same call within it (go-redis sends a
// command again when its reply was lost, within seconds) adds nothing.
const OfferRecordTTL = impl.OfferRecordTTL

// checkDelay validates the delay of OfferIn.
func checkDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: negative delay %v", ErrInvalidArgument, d)
	}
	return nil
}

// checkAt validates the due time of OfferAt.
func checkAt(t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%w: zero time", ErrInvalidArgument)
	}
	return nil
}

// waitEnd is when a take with the given wait (< 0: as long as ctx
// allows) gives up; zero means never.
func waitEnd(ctx context.Context, wait time.Duration) time.Time {
	var end time.Time
	if wait >= 0 {
		end = time.Now().Add(wait)
	}
	if dl, ok := ctx.Deadline(); ok && (end.IsZero() || dl.Before(end)) {
		end = dl
	}
	return end
}

// emptyError is the error of a take that found nothing: ErrEmpty, and the
// caller's context error when it was the caller's context that ended.
func emptyError(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && !time.Now().Before(dl) {
		// Past the deadline, before the context's timer noticed it.
		return fmt.Errorf("%w: %w", ErrEmpty, context.DeadlineExceeded)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrEmpty, context.Cause(ctx))
	}
	return ErrEmpty
}

// emptyTaking is the error of a take from key whose wait ended while its
// call was in flight: ErrEmpty alone when the take's own wait (TryTake's)
// ran out, and with the context's error when the caller's context ended
// (emptyError), as when the wait ends between calls.
func emptyTaking(ctx context.Context, key string) error {
	if err := emptyError(ctx); err != ErrEmpty {
		return fmt.Errorf("%w (taking from %s)", err, key)
	}
	return ErrEmpty
}

// giveBack puts what a plain queue's pop took after its caller gave up
// (popped's {key, item or items}) back at the head of the queue, in its
// order: best effort, under a release context.
func (q *queue) giveBack(res any) {
	kv, ok := res.([]any)
	if !ok || len(kv) != 2 {
		return
	}
	var items []any
	switch v := kv[1].(type) {
	case string:
		items = []any{v}
	case []any:
		items = v
	}
	if len(items) == 0 {
		return
	}
	slices.Reverse(items) // LPUSH puts its last argument first
	ctx, cancel := releaseContext(context.Background())
	defer cancel()
	_ = q.c.rdb.LPush(ctx, q.key, items...).Err() // a plain queue's items are at most once
}

// pop takes the first ready body of a plain queue, waiting until end
// (zero: as long as ctx allows) unless once.
func (q *queue) pop(ctx context.Context, end time.Time, once bool) ([]byte, error) {
	bodies, err := q.popN(ctx, end, once, 1)
	if err != nil {
		return nil, err
	}
	return bodies[0], nil
}

// popN takes up to n ready bodies of a plain queue (LPOP, with a count
// when n > 1), waiting until end (zero: as long as ctx allows) for the
// first unless once. A waiting take holds no pool connection: it
// registers as a waiting consumer and sleeps until an offer (or the delay
// timer) wakes it, or its refresh (see await).
func (q *queue) popN(ctx context.Context, end time.Time, once bool, n int) ([][]byte, error) {
	if err := q.c.checkOpen(); err != nil {
		return nil, err
	}
	if once {
		bodies, err := q.lpop(ctx, time.Time{}, n)
		switch {
		case err != nil:
			return nil, err
		case len(bodies) == 0:
			return nil, ErrEmpty
		}
		return bodies, nil
	}
	var out [][]byte
	err := q.await(ctx, end, func(owner string, registered bool) (bool, time.Duration, error) {
		if err := q.c.checkOpen(); err != nil {
			return false, 0, err
		}
		// One call takes, or registers owner when there is nothing to
		// take (queue_pop with an owner); one that takes after a wake-up
		// by the timer, not by name, takes owner's entry out with it.
		bodies, err := q.popAs(ctx, end, n, owner, registered)
		if err != nil || len(bodies) > 0 {
			out = bodies
			return len(bodies) > 0, 0, err
		}
		return false, groupedSleep, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lpop takes up to n ready bodies (queue_pop: LPOP with a count, unless
// the queue is paused) within end and ctx's deadline; what it takes after
// its caller gave up goes back (giveBack). It returns none when the queue
// is empty or paused.
func (q *queue) lpop(ctx context.Context, end time.Time, n int) ([][]byte, error) {
	return q.popAs(ctx, end, n, "", false)
}

// popAs is lpop for owner, a blocking Take's consumer ("": none), which
// the same call registers in the queue's takers when it takes nothing
// (rdb.Queue.PopOrWait); registered says owner may be registered from an
// earlier call.
func (q *queue) popAs(ctx context.Context, end time.Time, n int, owner string, registered bool) ([][]byte, error) {
	wctx, cancel := boundedContext(ctx, end)
	defer cancel()
	// Sent without ctx's end (a pop cut short in flight may have taken
	// items: they are given back once its reply comes), waited for until
	// wctx's: the lane bounds the wait without a goroutine of its own.
	cmd := q.ops().PopOrWait(context.WithoutCancel(ctx), wctx, n, owner, registered,
		func(c *redis.Cmd) { q.giveBack(popped(c)) })
	// queue_pop reply: nil | {string...}
	ss, err := cmd.StringSlice()
	switch {
	case err != nil && wctx.Err() != nil && errors.Is(err, wctx.Err()): // the wait ended first
		return nil, emptyTaking(ctx, q.key)
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("lockgen: taking from %s: %w", q.key, err)
	}
	return bytesOf(ss), nil
}

// popped returns what a queue_pop took, as giveBack takes it.
func popped(c *redis.Cmd) any {
	ss, err := c.StringSlice()
	if err != nil || len(ss) == 0 {
		return nil
	}
	items := make([]any, len(ss))
	for i, s := range ss {
		items[i] = s
	}
	return []any{"", items}
}

func bytesOf(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// peek returns up to n ready bodies, first ready first, without taking
// them: LRANGE for a plain queue (its list holds the bodies), the peek
// script for a reliable one.
func (q *queue) peek(ctx context.Context, n int) ([][]byte, error) {
	if err := q.c.checkOpen(); err != nil {
		return nil, err
	}
	res, err := readValue(ctx, func() ([]string, error) {
		if q.def.Reliable {
			// queue_peek reply: {string...}
			return q.ops().Peek(ctx, n).StringSlice()
		}
		return q.c.rdb.LRange(ctx, q.key, 0, int64(n)-1).Result()
	})
	if err != nil {
		return nil, fmt.Errorf("lockgen: peeking at %s: %w", q.key, err)
	}
	return bytesOf(res), nil
}

// peekN decodes the first n ready items. An item that does not decode
// ends it with the decode error (Take would dead-letter that item).
func peekN[T any](ctx context.Context, q *queue, codec Codec[T], n int) ([]T, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: peek %d", ErrInvalidArgument, n)
	}
	bodies, err := q.peek(ctx, n)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(bodies))
	for _, b := range bodies {
		v, err := decodeItem(codec, b)
		if err != nil {
			return out, fmt.Errorf("lockgen: peeking at %s: an item that does not decode: %w", q.key, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// peekOne is Peek: the first ready item, or ErrEmpty.
func peekOne[T any](ctx context.Context, q *queue, codec Codec[T]) (T, error) {
	var zero T
	vs, err := peekN(ctx, q, codec, 1)
	switch {
	case err != nil:
		return zero, err
	case len(vs) == 0:
		return zero, ErrEmpty
	}
	return vs[0], nil
}

// DelayedItem is a delayed queue's item that is not ready yet: offered
// with a delay (or, on a reliable queue, given back with one) and not
// moved to the ready items.
type DelayedItem[T any] struct {
	// ID is the item's id: on a reliable queue, the id of its deliveries
	// once it is ready (Delivery.ID, RemoveID); a plain queue's item keeps
	// it only while it is delayed.
	ID    string
	Due   time.Time // when it is due, on the Redis server's clock
	Value T
}

// delayedItems returns up to n (0: all) delayed items, due first first.
// An item that does not decode ends it with the decode error.
func delayedItems[T any](ctx context.Context, q *queue, codec Codec[T], n int) ([]DelayedItem[T], error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: peek %d", ErrInvalidArgument, n)
	}
	if err := q.c.checkOpen(); err != nil {
		return nil, err
	}
	// queue_delayed reply: {string...} | int
	res, err := readValue(ctx, func() ([]string, error) { return q.ops().Delayed(ctx, n).StringSlice() })
	if err != nil {
		return nil, fmt.Errorf("lockgen: reading the delayed items of %s: %w", q.key, err)
	}
	out := make([]DelayedItem[T], 0, len(res)/3)
	for i := 0; i+2 < len(res); i += 3 {
		due, err := strconv.ParseInt(res[i+1], 10, 64)
		if err != nil {
			return out, fmt.Errorf("lockgen: reading the delayed items of %s: due time %q: %w", q.key, res[i+1], err)
		}
		v, err := decodeItem(codec, []byte(res[i+2]))
		if err != nil {
			return out, fmt.Errorf("lockgen: reading the delayed items of %s: item %s does not decode: %w", q.key, res[i], err)
		}
		out = append(out, DelayedItem[T]{ID: res[i], Due: time.UnixMilli(due), Value: v})
	}
	return out, nil
}

// containsDelayed reports whether a delayed item holds v (compared by the
// codec's bytes, as removeItems compares).
func containsDelayed[T any](ctx context.Context, q *queue, codec Codec[T], v T) (bool, error) {
	b, err := codec.Encode(v)
	if err != nil {
		return false, fmt.Errorf("lockgen: encoding an item for %s: %w", q.key, err)
	}
	if err := q.c.checkOpen(); err != nil {
		return false, err
	}
	// queue_delayed reply: {string...} | int
	n, err := readValue(ctx, func() (int64, error) { return q.ops().DelayedHolds(ctx, b, codecTag(codec)).Int64() })
	if err != nil {
		return false, fmt.Errorf("lockgen: looking for a delayed item of %s: %w", q.key, err)
	}
	return n == 1, nil
}

// removeItems removes up to limit (0: all) ready and delayed items equal
// to v's encoding, ready ones first.
func removeItems[T any](ctx context.Context, q *queue, codec Codec[T], v T, limit int) (int, error) {
	b, err := codec.Encode(v)
	if err != nil {
		return 0, fmt.Errorf("lockgen: encoding an item for %s: %w", q.key, err)
	}
	if err := q.c.checkOpen(); err != nil {
		return 0, err
	}
	ops := q.ops()
	record, resent := ops.Recorded(q.c.newSharedOp())
	// queue_remove reply: int
	n, err := ops.Remove(ctx, record, resent, b, codecTag(codec), limit).Int()
	if err != nil {
		return 0, fmt.Errorf("lockgen: removing from %s: %w", q.key, err)
	}
	return n, nil
}

// drainBatch bounds how many items one drain script call takes.
const drainBatch = 1000

// drain takes every item ready when it starts out of the queue for good,
// in script calls of up to drainBatch items, and decodes them; items that
// do not decode are dead-lettered with the decode error.
func drain[T any](ctx context.Context, q *queue, codec Codec[T]) ([]T, error) {
	if err := q.c.checkOpen(); err != nil {
		return nil, err
	}
	var out []T
	left := int64(-1) // items still to drain of those ready at the start
	for left != 0 {
		batch := drainBatch
		if left > 0 {
			batch = int(min(left, drainBatch))
		}
		ops := q.ops()
		record, resent := ops.Recorded(q.c.newSharedOp())
		// queue_drain reply: {int, string...}
		res, err := ops.Drain(ctx, record, resent, batch).Slice()
		if err != nil {
			return out, fmt.Errorf("lockgen: draining %s: %w", q.key, err)
		}
		if len(res) == 0 {
			return out, fmt.Errorf("lockgen: draining %s: unexpected reply %v", q.key, res)
		}
		ready, _ := res[0].(int64)
		if left < 0 {
			left = ready + int64(batch) // the first call's batch and what was left behind it
		}
		left = max(min(left-int64(batch), ready), 0)
		for _, r := range res[1:] {
			s, _ := r.(string)
			v, err := decodeItem(codec, []byte(s))
			if err != nil {
				if err := q.bury(ctx, []byte(s), err); err != nil {
					return out, err
				}
				continue
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// ops returns q's script operations (runtime/internal/rdb).
func (q *queue) ops() rdb.Queue {
	return rdb.Queue{Conn: &q.c.conn, Def: q.def, Key: q.key, Keys: q.keys}
}

// bury puts a body a plain queue's consumer could not decode on the dead
// list.
func (q *queue) bury(ctx context.Context, body []byte, cause error) error {
	// queue_bury reply: string (not read)
	err := q.ops().Bury(context.WithoutCancel(ctx), body, "decode: "+cause.Error(), q.c.newSharedOp()).Err()
	if err != nil {
		return fmt.Errorf("lockgen: dead-lettering an item of %s that does not decode (%v): %w", q.key, cause, err)
	}
	q.c.observe(ctx, Event{Kind: EventDead, Object: q.def.Name, Err: cause})
	return nil
}

// QueueStats counts a queue's items.
type QueueStats struct {
	Ready    int64 // ready to take
	Delayed  int64 // offered with a delay and not due yet (or not moved yet)
	InFlight int64 // reliable: delivered and not acknowledged yet
	Dead     int64 // on the dead-letter list
	Paused   bool  // its consumers are paused (see Pause)
}

func (q *queue) len(ctx context.Context) (int64, error) {
	n, err := readValue(ctx, func() (int64, error) { return q.c.rdb.LLen(ctx, q.key).Result() })
	if err != nil {
		return 0, fmt.Errorf("lockgen: length of %s: %w", q.key, err)
	}
	return n, nil
}

func (q *queue) stats(ctx context.Context) (QueueStats, error) {
	st, err := readValue(ctx, func() (QueueStats, error) {
		pipe := q.c.rdb.Pipeline()
		ready := pipe.LLen(ctx, q.keys[kReady])
		delayed := pipe.ZCard(ctx, q.keys[kDelayed])
		inflight := pipe.ZCard(ctx, q.keys[kInflight])
		dead := pipe.LLen(ctx, q.keys[kDead])
		paused := pipe.Exists(ctx, q.ops().PausedKey())
		_, err := pipe.Exec(ctx)
		return QueueStats{Ready: ready.Val(), Delayed: delayed.Val(), InFlight: inflight.Val(), Dead: dead.Val(), Paused: paused.Val() == 1}, err
	})
	if err != nil {
		return QueueStats{}, fmt.Errorf("lockgen: stats of %s: %w", q.key, err)
	}
	return st, nil
}

// DeadLetter is an item on a queue's dead-letter list.
type DeadLetter[T any] struct {
	ID    string
	Value T      // the decoded item; the zero value when Raw does not decode
	Raw   []byte // the item as stored
	// Reason says why it was dead-lettered: the decode error, the reason
	// given to Nack, or the visibility timeout that ran out.
	Reason     string
	Deliveries int   // how many times it was delivered
	DecodeErr  error // why Raw does not decode, or nil
}

// deadLetters returns the n oldest dead letters.
func deadLetters[T any](ctx context.Context, q *queue, codec Codec[T], n int) ([]DeadLetter[T], error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d dead letters", ErrInvalidArgument, n)
	}
	// queue_dead reply: {string...}
	res, err := readValue(ctx, func() ([]string, error) {
		return q.ops().Dead(ctx, 0, n).StringSlice()
	})
	if err != nil {
		return nil, fmt.Errorf("lockgen: dead letters of %s: %w", q.key, err)
	}
	out := make([]DeadLetter[T], 0, len(res)/4)
	for i := 0; i+3 < len(res); i += 4 {
		d := DeadLetter[T]{ID: res[i], Raw: []byte(res[i+1]), Reason: res[i+2]}
		d.Deliveries, _ = strconv.Atoi(res[i+3])
		d.Value, d.DecodeErr = decodeItem(codec, d.Raw)
		out = append(out, d)
	}
	return out, nil
}

// redriveBatch bounds how many dead letters one script call moves, so that
// a large re-drive does not hold Redis for long.
const redriveBatch = 1000

// redrive puts up to n of the oldest dead letters back on the ready list.
func (q *queue) redrive(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: re-drive %d", ErrInvalidArgument, n)
	}
	total := 0
	for total < n {
		batch := min(n-total, redriveBatch)
		ops := q.ops()
		record, resent := ops.Recorded(q.c.newSharedOp())
		// queue_redrive reply: int
		moved, err := ops.Redrive(ctx, record, resent, batch).Int()
		if err != nil {
			return total, fmt.Errorf("lockgen: re-driving dead letters of %s: %w", q.key, err)
		}
		total += moved
		if moved < batch {
			break
		}
	}
	return total, nil
}

// Queue is a plain queue of T: a taken item is gone (at most once). It is
// a generated constructor's result, a small value that does not contact
// Redis until a method is called. Many producers and consumers, on any
// number of clients, may use one queue.
//
// A Take that finds the queue empty waits holding no connection of the
// go-redis pool: it registers as a waiting consumer and an offer wakes
// one waiting Take per item (see "Queues" in docs/design.md).
type Queue[T any] struct {
	q     *queue
	codec Codec[T]
}

// makeQueue returns the plain queue with the given definition (emitted by
// lockgen), codec and key. It does not contact Redis. (Go methods cannot
// take type parameters, so queue constructors are functions, not methods
// of Client.)
func makeQueue[T any](c *Client, def *impl.QueueDef, codec Codec[T], key string) *Queue[T] {
	return &Queue[T]{q: newQueue(c, def, key), codec: codec}
}

// Key returns the queue's Redis key (its ready list).
func (q *Queue[T]) Key() string { return q.q.key }

// Name returns the queue's name in the spec.
func (q *Queue[T]) Name() string { return q.q.def.Name }

// Offer appends v to the queue. It returns an encoding error, ErrItemTooLarge, ErrClosed,
// or a Redis error.
func (q *Queue[T]) Offer(ctx context.Context, v T) error {
	return q.OfferMany(ctx, v)
}

// OfferMany appends vs to the queue, in order, in one round trip. It
// returns an encoding error, ErrItemTooLarge, ErrClosed, or a Redis error.
func (q *Queue[T]) OfferMany(ctx context.Context, vs ...T) error {
	bodies, err := encodeAll(q.q, q.codec, vs)
	if err != nil {
		return err
	}
	return q.q.offer(ctx, 0, time.Time{}, bodies...)
}

// Take removes and returns the first item, waiting for one as long as the
// context allows. An item that does not decode is dead-lettered with the
// decode error, and Take goes on with the next one.
//
// It returns ErrEmpty when the context ended the wait (also matching the
// context's error), ErrClosed, or a Redis error.
func (q *Queue[T]) Take(ctx context.Context) (T, error) { return q.take(ctx, -1) }

// TryTake is Take waiting at most wait (0: no wait). It returns the errors
// Take returns, ErrEmpty when the wait ran out, and ErrInvalidArgument for
// a negative wait.
func (q *Queue[T]) TryTake(ctx context.Context, wait time.Duration) (T, error) {
	if wait < 0 {
		var zero T
		return zero, fmt.Errorf("%w: negative wait %v", ErrInvalidArgument, wait)
	}
	return q.take(ctx, wait)
}

func (q *Queue[T]) take(ctx context.Context, wait time.Duration) (_ T, err error) {
	ctx, obsEnd := q.q.c.start(ctx, OpTake, q.q.def.Name)
	defer func() { q.q.c.observeTake(ctx, obsEnd, q.q.def.Name, 1, err) }()
	var zero T
	defer q.q.done(q.q.serve(true))
	end := waitEnd(ctx, wait)
	for {
		if ctx.Err() != nil {
			return zero, emptyError(ctx)
		}
		body, err := q.q.pop(ctx, end, wait == 0)
		if err != nil {
			return zero, err
		}
		v, err := decodeItem(q.codec, body)
		if err == nil {
			q.q.c.extractItem(ctx, body)
			return v, nil
		}
		if err := q.q.bury(ctx, body, err); err != nil {
			return zero, err
		}
	}
}

// TakeN removes and returns up to n items, first ready first, waiting as
// long as the context allows until at least one is ready. It is one round
// trip (queue_pop: LPOP with a count after the pause check) when an item
// is ready. Items that do not decode are dead-lettered as by Take.
//
// It returns ErrInvalidArgument for n < 1, and the errors of Take.
func (q *Queue[T]) TakeN(ctx context.Context, n int) ([]T, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: take %d", ErrInvalidArgument, n)
	}
	return q.takeN(ctx, -1, n)
}

// TryTakeN is TakeN waiting at most wait (0: no wait). It returns the
// errors TakeN returns, ErrEmpty when the wait ran out, and
// ErrInvalidArgument for a negative wait.
func (q *Queue[T]) TryTakeN(ctx context.Context, n int, wait time.Duration) ([]T, error) {
	if n < 1 || wait < 0 {
		return nil, fmt.Errorf("%w: take %d, wait %v", ErrInvalidArgument, n, wait)
	}
	return q.takeN(ctx, wait, n)
}

func (q *Queue[T]) takeN(ctx context.Context, wait time.Duration, n int) (out []T, err error) {
	ctx, obsEnd := q.q.c.start(ctx, OpTake, q.q.def.Name)
	defer func() { q.q.c.observeTake(ctx, obsEnd, q.q.def.Name, len(out), err) }()
	defer q.q.done(q.q.serve(true))
	end := waitEnd(ctx, wait)
	for {
		if ctx.Err() != nil {
			return nil, emptyError(ctx)
		}
		bodies, err := q.q.popN(ctx, end, wait == 0, n)
		if err != nil {
			return nil, err
		}
		for _, b := range bodies {
			v, err := decodeItem(q.codec, b)
			if err == nil {
				q.q.c.extractItem(ctx, b)
				out = append(out, v)
				continue
			}
			if err := q.q.bury(ctx, b, err); err != nil {
				if len(out) > 0 {
					// The items taken are gone from Redis: hand them over.
					return out, nil
				}
				return nil, err
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// Peek returns the first ready item without taking it. It returns ErrEmpty
// when no item is ready, the decode error of an item that does not decode
// (Take dead-letters it), ErrClosed, or a Redis error. One round trip
// (LRANGE).
func (q *Queue[T]) Peek(ctx context.Context) (T, error) { return peekOne(ctx, q.q, q.codec) }

// PeekN returns up to n ready items, first ready first, without taking
// them, in one round trip. It returns ErrInvalidArgument for n < 1, the
// items before one that does not decode with its decode error, ErrClosed,
// or a Redis error.
func (q *Queue[T]) PeekN(ctx context.Context, n int) ([]T, error) { return peekN(ctx, q.q, q.codec, n) }

// Remove removes one item equal to v, the first ready one, or else the
// delayed one due first, and reports whether there was one. Items are
// equal when the codec encodes them to the same bytes. It reads the
// queue in Redis until it finds one (O(N) for a long queue), in one round
// trip. It returns an encoding error, ErrClosed, or a Redis error.
func (q *Queue[T]) Remove(ctx context.Context, v T) (bool, error) {
	n, err := removeItems(ctx, q.q, q.codec, v, 1)
	return n > 0, err
}

// RemoveAll removes every ready and delayed item equal to v (see Remove)
// and returns how many it removed, in one round trip that reads every
// ready and delayed item. It returns the errors of Remove.
func (q *Queue[T]) RemoveAll(ctx context.Context, v T) (int, error) {
	return removeItems(ctx, q.q, q.codec, v, 0)
}

// Drain removes and returns every item ready when it starts, first ready
// first, as Redisson's drainTo does: it takes them without waiting, one
// round trip per 1000 items. Delayed items stay. Items that do not
// decode are dead-lettered. It returns ErrClosed, or a Redis error with
// the items drained before it.
func (q *Queue[T]) Drain(ctx context.Context) ([]T, error) { return drain(ctx, q.q, q.codec) }

// Len returns the number of items ready to take, or a Redis error.
func (q *Queue[T]) Len(ctx context.Context) (int64, error) { return q.q.len(ctx) }

// Stats counts the queue's items in one round trip, or returns a Redis
// error.
func (q *Queue[T]) Stats(ctx context.Context) (QueueStats, error) { return q.q.stats(ctx) }

// DeadLetters returns the n oldest dead letters (items that did not
// decode), or ErrInvalidArgument for n <= 0, or a Redis error.
func (q *Queue[T]) DeadLetters(ctx context.Context, n int) ([]DeadLetter[T], error) {
	return deadLetters(ctx, q.q, q.codec, n)
}

// Redrive puts up to n of the oldest dead letters back at the end of the
// queue and returns how many it moved. It returns ErrInvalidArgument for
// n <= 0, or a Redis error with the number moved before it.
func (q *Queue[T]) Redrive(ctx context.Context, n int) (int, error) { return q.q.redrive(ctx, n) }

// Start starts this client's delay timer of a delayed queue and waits
// until it has moved every item already due, such as items left by
// clients that stopped. The first Offer or Take starts the timer too,
// without waiting. For a queue without delays it does nothing. It returns
// the context's error, ErrClosed, or the first move's Redis error (the
// timer keeps retrying).
func (q *Queue[T]) Start(ctx context.Context) error { return q.q.start(ctx) }

// DelayedQueue is a plain queue whose items may be offered with a delay:
// an item is ready to take once due (see the delay timer in the package
// documentation).
type DelayedQueue[T any] struct {
	*Queue[T]
}

// makeDelayedQueue returns the delayed queue with the given definition,
// codec and key. It does not contact Redis.
func makeDelayedQueue[T any](c *Client, def *impl.QueueDef, codec Codec[T], key string) *DelayedQueue[T] {
	return &DelayedQueue[T]{makeQueue(c, def, codec, key)}
}

// OfferIn adds v, due after delay, as measured by the Redis server's
// clock; 0 makes it ready now. It returns ErrInvalidArgument for a
// negative delay, an encoding error, ErrItemTooLarge, ErrClosed, or a Redis error.
func (q *DelayedQueue[T]) OfferIn(ctx context.Context, v T, delay time.Duration) error {
	if err := checkDelay(delay); err != nil {
		return err
	}
	_, err := offerOne(ctx, q.q, q.codec, v, delay, time.Time{})
	return err
}

// OfferAt adds v, due at t on the Redis server's clock; a time already
// past makes it ready now. It returns ErrInvalidArgument for the zero
// time, an encoding error, ErrItemTooLarge, ErrClosed, or a Redis error.
func (q *DelayedQueue[T]) OfferAt(ctx context.Context, v T, t time.Time) error {
	if err := checkAt(t); err != nil {
		return err
	}
	_, err := offerOne(ctx, q.q, q.codec, v, 0, t)
	return err
}

// PeekDelayed returns up to n items not ready yet, due first first, with
// their due times and ids, without changing anything (Redisson's
// RDelayedQueue.peek, for n items). Items due already that no delay timer
// has moved yet are among them (their Due is past). It is one round trip
// (a read-only script, one consistent view) and returns
// ErrInvalidArgument for n < 1, the items before one that does not decode
// with its decode error, ErrClosed, or a Redis error.
func (q *DelayedQueue[T]) PeekDelayed(ctx context.Context, n int) ([]DelayedItem[T], error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: peek %d", ErrInvalidArgument, n)
	}
	return delayedItems(ctx, q.q, q.codec, n)
}

// ReadDelayed returns every item not ready yet, as PeekDelayed does
// (Redisson's RDelayedQueue.readAll). It reads them all in one round trip:
// O(N) in Redis and in memory. It returns the errors of PeekDelayed.
func (q *DelayedQueue[T]) ReadDelayed(ctx context.Context) ([]DelayedItem[T], error) {
	return delayedItems(ctx, q.q, q.codec, 0)
}

// ContainsDelayed reports whether an item not ready yet equals v
// (Redisson's RDelayedQueue.contains): equal as Remove compares, by the
// codec's bytes. It reads the delayed items in Redis until it finds one,
// in one round trip (a read-only script: O(N)), and changes nothing. It
// returns an encoding error, ErrClosed, or a Redis error.
func (q *DelayedQueue[T]) ContainsDelayed(ctx context.Context, v T) (bool, error) {
	return containsDelayed(ctx, q.q, q.codec, v)
}

// offerOne offers v and returns its id ("" for a plain queue's item ready
// now, which has none).
func offerOne[T any](ctx context.Context, q *queue, codec Codec[T], v T, delay time.Duration, at time.Time) (string, error) {
	bodies, err := encodeAll(q, codec, []T{v})
	if err != nil {
		return "", err
	}
	return q.offerKey(ctx, delay, at, "", 0, bodies...)
}

// itemIDs returns the ids of the n items of one offer whose first item's
// id is first: queue_offer names them <op>-1 ... <op>-n (one item: <op>).
func itemIDs(first string, n int) []string {
	if n == 1 {
		return []string{first}
	}
	base := strings.TrimSuffix(first, "-1")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = base + "-" + strconv.Itoa(i+1)
	}
	return ids
}

func encodeAll[T any](q *queue, codec Codec[T], vs []T) ([][]byte, error) {
	bodies := make([][]byte, len(vs))
	for i, v := range vs {
		b, err := encodeItem(codec, v)
		if err != nil {
			return nil, fmt.Errorf("lockgen: encoding an item for %s: %w", q.key, err)
		}
		bodies[i] = b
	}
	return bodies, nil
}

// The delay timer (runtime/internal/delay) serves the queue through
// Key, Channel and Move.

// moveBatch is how many items one run of the move script moves at most of
// each kind; a full batch makes the scheduler run it again at once.
const moveBatch = 100

// moveTimeout bounds one run of the move script.
const moveTimeout = 5 * time.Second

// Move runs the move script until no batch is full, and returns how long
// until the next due time, or -1 when nothing is due.
// With observers, the script also replies how late each delayed item it
// moved was, and each is reported as EventDue.
func (q *queue) Move() (time.Duration, error) {
	late := len(q.c.observers) > 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
		sent := time.Now()
		// queue_move reply: {int, int, int, int, int...}
		res, err := q.ops().Move(ctx, moveBatch, late).Int64Slice()
		cancel()
		if err != nil {
			return 0, fmt.Errorf("lockgen: delay timer of %s: %w", q.key, err)
		}
		if len(res) < 4 {
			return 0, fmt.Errorf("lockgen: delay timer of %s: unexpected reply %v", q.key, res)
		}
		for _, ms := range res[4:] {
			q.c.observe(context.Background(), Event{Kind: EventDue, Object: q.def.Name, Duration: time.Duration(ms) * time.Millisecond})
		}
		now, next, full := res[0], res[1], res[3]
		// The server's clock against the middle of the round trip.
		mid := sent.Add(time.Since(sent) / 2)
		if o := now*int64(time.Millisecond) - mid.UnixNano(); o != 0 {
			q.offset.Store(o)
		} else {
			q.offset.Store(1)
		}
		if full == 1 {
			continue
		}
		if next < 0 {
			return -1, nil
		}
		return time.Duration(max(next-now, 0)) * time.Millisecond, nil
	}
}

// DueAt reads a message on the queue's channel: the due time it
// announces (server ms, see queue_offer and queue_move), on the local
// clock as the last move's reply showed the server's (the delay timer's).
func (q *queue) DueAt(payload string) (time.Time, bool) {
	ms, err := strconv.ParseInt(payload, 10, 64)
	o := q.offset.Load()
	if err != nil || o == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms).Add(-time.Duration(o)), true
}

// Name is the queue's name in the spec (the delay timer's).
func (q *queue) Name() string { return q.def.Name }

// Key is the queue's key (the delay timer's).
func (q *queue) Key() string { return q.key }

// Channel is where the queue's scripts announce earlier due items.
func (q *queue) Channel() string { return q.ch }
