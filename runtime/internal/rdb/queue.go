package rdb

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Queue is a queue's script operations (templates/queue_*.lua): a small
// value, made per call. Every queue script takes the queue's eleven keys
// (ready, delayed, data, seq, armed, proc, inflight, att, dead, err,
// takers: Keys)
// and the publish command first; those that keep a record of their
// operation take the record's key after them.
type Queue struct {
	Conn *Conn
	Def  *impl.QueueDef
	Key  string   // the ready list
	Keys []string // the scripts' eleven keys
}

// recordTTL is impl.OfferRecordTTL in milliseconds, boxed.
var recordTTL any = impl.OfferRecordTTL.Milliseconds()

// mode is the queue's type as the scripts take it: "r" reliable, "p"
// plain.
func (q Queue) mode() any {
	if q.Def.Reliable {
		return modeReliable
	}
	return modePlain
}

var modeReliable, modePlain any = "r", "p"

// withRecord returns the eleven keys and record's.
func (q Queue) withRecord(record string) []string {
	return append(q.Keys[:len(q.Keys):len(q.Keys)], record)
}

// Recorded returns, for a call that keeps its reply in a record
// (Remove, Drain, Redrive), the record's key, <queue>:op:<op> (op unique
// across clients), and the argument that tells the script it was sent
// again, which only then reads the record.
func (q Queue) Recorded(op string) (record string, resent *Marked) {
	return q.OpRecord(op), &Marked{}
}

// OpRecord returns the key of an offer's record, <queue>:op:<op>.
func (q Queue) OpRecord(op string) string { return keys.Sub(q.Key, "op:"+op) }

// KeyRecord returns the key of a dedupe key's record, <queue>:key:<key>.
func (q Queue) KeyRecord(key string) string { return keys.Sub(q.Key, "key:"+key) }

// Offer runs queue_offer: bodies, ready now unless delay or at say when
// they are due, as operation op, recorded at record for recordFor, in
// the producers' lane (offers made at once go in one pipeline):
//
//	KEYS: the eleven, record
//	ARGV: publish, mode, delay_ms, due_ms, op, record_ms, items...
//
// The caller decodes its reply (see the script's header).
func (q Queue) Offer(ctx context.Context, delay time.Duration, at time.Time, op, record string, recordFor time.Duration, bodies [][]byte) *redis.Cmd {
	ttl := recordTTL
	if recordFor != impl.OfferRecordTTL {
		ttl = recordFor.Milliseconds()
	}
	args := make([]any, 0, 6+len(bodies))
	args = append(args, q.Conn.publish(), q.mode(), "", "", op, ttl)
	switch {
	case delay > 0:
		args[2] = CeilMillis(delay)
	case !at.IsZero():
		args[3] = ceilUnixMillis(at)
	}
	for _, b := range bodies {
		args = append(args, b)
	}
	return q.Conn.EvalWithin(ctx, &q.Conn.Offers, q.Def.Scripts.Offer, q.withRecord(record), args...)
}

// ceilUnixMillis returns t in Unix milliseconds, rounded up.
func ceilUnixMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

// Peek runs queue_peek: up to n ready bodies, first ready first.
//
//	KEYS: the eleven
//	ARGV: publish, n
func (q Queue) Peek(ctx context.Context, n int) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Peek, q.Keys, q.Conn.publish(), n)
}

// Delayed runs queue_delayed: up to n (0: all) delayed items, due first
// first, read only.
//
//	KEYS: the eleven
//	ARGV: publish, n
func (q Queue) Delayed(ctx context.Context, n int) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Delayed, q.Keys, q.Conn.publish(), n)
}

// DelayedHolds runs queue_delayed for whether a delayed item holds value,
// encoded by the codec tagged tag, read only.
//
//	KEYS: the eleven
//	ARGV: publish, n (0), value, tag
func (q Queue) DelayedHolds(ctx context.Context, value []byte, tag byte) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Delayed, q.Keys, q.Conn.publish(), 0, value, []byte{tag})
}

// Remove runs queue_remove: up to limit (0: all) ready and delayed items
// equal to value, encoded by the codec tagged tag, recorded at record:
//
//	KEYS: the eleven, record
//	ARGV: publish, mode, value, tag, n, resent, record_ms
func (q Queue) Remove(ctx context.Context, record string, resent *Marked, value []byte, tag byte, limit int) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Remove, q.withRecord(record), q.Conn.publish(), q.mode(), value, []byte{tag}, limit, resent, recordTTL)
}

// Drain runs queue_drain: up to n ready items out of the queue for good,
// recorded at record:
//
//	KEYS: the eleven, record
//	ARGV: publish, mode, n, resent, record_ms
func (q Queue) Drain(ctx context.Context, record string, resent *Marked, n int) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Drain, q.withRecord(record), q.Conn.publish(), q.mode(), n, resent, recordTTL)
}

// Redrive runs queue_redrive: up to n of the oldest dead letters back on
// the ready list, recorded at record:
//
//	KEYS: the eleven, record
//	ARGV: publish, mode, n, resent, record_ms
func (q Queue) Redrive(ctx context.Context, record string, resent *Marked, n int) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Redrive, q.withRecord(record), q.Conn.publish(), q.mode(), n, resent, recordTTL)
}

// Bury runs queue_bury: body on the dead list for reason, named id
// (unique across clients: a resend adds nothing).
//
//	KEYS: the eleven
//	ARGV: publish, body, reason, id
func (q Queue) Bury(ctx context.Context, body []byte, reason, id string) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Bury, q.Keys, q.Conn.publish(), body, reason, id)
}

// Dead runs queue_dead: the n oldest dead letters after skip.
//
//	KEYS: the eleven
//	ARGV: publish, skip, n
func (q Queue) Dead(ctx context.Context, skip, n int) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Dead, q.Keys, q.Conn.publish(), skip, n)
}

// Move runs queue_move, the delay timer's step: up to batch due items to
// the ready list and expired deliveries back; with late, it also replies
// how late each moved item was.
//
//	KEYS: the eleven
//	ARGV: publish, mode, batch, visibility_ms, max_deliveries, lateness?
func (q Queue) Move(ctx context.Context, batch int, late bool) *redis.Cmd {
	lateness := ""
	if late {
		lateness = "1"
	}
	return q.Conn.EvalIn(ctx, &q.Conn.Moves, q.Def.Scripts.Move, q.Keys, q.Conn.publish(), q.mode(), batch,
		q.Def.Visibility.Milliseconds(), q.Def.MaxDeliveries, lateness)
}

// Take runs queue_take: claims up to n ready items of a reliable queue
// (id first, when not "": an id a blocking move of an older runtime put
// on the proc list), as operation op (its record <queue>:op:<op>). With
// an owner, a claim that finds nothing registers owner as a waiting
// consumer (see Wait); registered says that owner may be registered from
// an earlier call, so that a claim takes its entry out.
//
//	KEYS: the eleven, record
//	ARGV: publish, visibility_ms, id, n, op, owner?, registered?
func (q Queue) Take(ctx context.Context, id string, n int, op *Marked, owner string, registered bool) *redis.Cmd {
	if owner == "" {
		return q.Conn.EvalIn(ctx, &q.Conn.Takes, q.Def.Scripts.Take, q.withRecord(q.OpRecord(op.S)), q.Conn.publish(), q.Def.Visibility.Milliseconds(), id, n, op)
	}
	reg := ""
	if registered {
		reg = "1"
	}
	return q.Conn.EvalIn(ctx, &q.Conn.Takes, q.Def.Scripts.Take, q.withRecord(q.OpRecord(op.S)), q.Conn.publish(), q.Def.Visibility.Milliseconds(), id, n, op, owner, reg)
}

// Wait runs queue_wait: registers owner as a consumer waiting for the
// queue's items (or refreshes its entry) unless items are ready, or, with
// leave, takes its entry out and passes a wake-up it did not use on. It
// returns by ctx's end (see Conn.EvalWithin).
//
//	KEYS: the eleven
//	ARGV: publish, owner, leave
func (q Queue) Wait(ctx context.Context, owner string, leave bool) *redis.Cmd {
	l := ""
	if leave {
		l = "1"
	}
	return q.Conn.EvalWithin(ctx, &q.Conn.Waits, q.Def.Scripts.Wait, q.Keys, q.Conn.publish(), owner, l)
}

// RefreshTakers runs queue_wait for a client's consumers waiting on the
// queue (owners, at least one): one call refreshes the entries of them
// all that are there, unless items are ready.
//
//	KEYS: the eleven
//	ARGV: publish, owner, leave ('r'), more owners...
func (q Queue) RefreshTakers(ctx context.Context, owners []string) *redis.Cmd {
	args := make([]any, 0, 2+len(owners))
	args = append(args, q.Conn.publish(), owners[0], "r")
	for _, o := range owners[1:] {
		args = append(args, o)
	}
	return q.Conn.EvalWithin(ctx, &q.Conn.Waits, q.Def.Scripts.Wait, q.Keys, args...)
}

// Nack runs queue_nack for delivery n of item id (an argument that counts
// its sends): back on the queue after delay, or dead-lettered for reason
// (dead: the script's mode).
//
//	KEYS: the eleven
//	ARGV: publish, id, delivery, max_deliveries, reason, dead, delay_ms
func (q Queue) Nack(ctx context.Context, id any, n int64, reason, dead string, delay time.Duration) *redis.Cmd {
	ms := int64(0)
	if delay > 0 {
		ms = CeilMillis(delay)
	}
	return q.Conn.Eval(ctx, q.Def.Scripts.Nack, q.Keys, q.Conn.publish(), id, n, q.Def.MaxDeliveries, reason, dead, ms)
}

// Ack runs queue_ack for delivery n of item id (an argument that counts
// its sends), in the Settles lane: it returns by ctx's end (see
// Conn.EvalWithin).
//
//	KEYS: the eleven
//	ARGV: publish, id, delivery, retention_ms?, max?
func (q Queue) Ack(ctx context.Context, id any, n int64) *redis.Cmd {
	if q.Def.Retention > 0 { // the item is kept, done (queueadmin.go)
		return q.Conn.EvalWithin(ctx, &q.Conn.Settles, q.Def.Scripts.Ack, q.Keys, q.Conn.publish(), id, n, q.Def.Retention.Milliseconds(), q.Def.RetainMax)
	}
	return q.Conn.EvalWithin(ctx, &q.Conn.Settles, q.Def.Scripts.Ack, q.Keys, q.Conn.publish(), id, n)
}

// AckAll runs queue_ack for several deliveries at once: ids[i] (the
// first an argument that counts its sends) at delivery ns[i].
//
//	KEYS: the eleven
//	ARGV: publish, id, delivery, retention_ms or '', max or '', more id,
//	      delivery pairs...
func (q Queue) AckAll(ctx context.Context, ids []any, ns []int64) *redis.Cmd {
	args := make([]any, 0, 5+2*len(ids))
	args = append(args, q.Conn.publish(), ids[0], ns[0])
	if q.Def.Retention > 0 { // the items are kept, done (queueadmin.go)
		args = append(args, q.Def.Retention.Milliseconds(), q.Def.RetainMax)
	} else {
		args = append(args, "", "")
	}
	for i, id := range ids[1:] {
		args = append(args, id, ns[i+1])
	}
	return q.Conn.EvalWithin(ctx, &q.Conn.Settles, q.Def.Scripts.Ack, q.Keys, args...)
}

// Extend runs queue_extend: delivery n of item id stays invisible for
// visibility from now.
//
//	KEYS: the eleven
//	ARGV: publish, id, delivery, visibility_ms
func (q Queue) Extend(ctx context.Context, id string, n int64, visibility time.Duration) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Extend, q.Keys, q.Conn.publish(), id, n, CeilMillis(visibility))
}
