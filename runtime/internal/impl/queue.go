package impl

import (
	"context"
	"time"
)

// OfferRecordTTL is how long a queue operation's record lives (the
// runtime's OfferRecordTTL documents it).
const OfferRecordTTL = time.Minute

// QueueWaiterTTL is how long a waiting consumer's entry in a queue's
// takers lives after its last refresh (templates/queue.luainc's
// taker_ttl; the runtime's QueueWaiterTTL documents it).
const QueueWaiterTTL = 30 * time.Second

// QueueScripts are the scripts of queues; every queue uses the same set.
// Every queue script takes the same KEYS, all sub-keys of the queue's key
// and so in one slot (each script's header names them and states its
// ARGV and reply; ARGV[1] is always the command that publishes on the
// queue's timer channel, KEYS[1]..':ch'):
//
//	KEYS[1]  ready     list: items ready to take (bodies for a plain queue, ids for a reliable one)
//	KEYS[2]  delayed   zset: ids of delayed items, scored by due time (unix ms, server clock)
//	KEYS[3]  data      hash: id -> body, for items known by id
//	KEYS[4]  seq       counter of ids (ids are "<server ms>-<n>"); expires after 10s unused
//	KEYS[5]  armed     the earliest due time every live delay timer is armed for; expires 1s after it
//	KEYS[6]  proc      list: ids a blocking move handed to a consumer that has not claimed them yet
//	KEYS[7]  inflight  zset: ids of deliveries in flight, scored by visibility deadline
//	KEYS[8]  att       hash: id -> deliveries so far
//	KEYS[9]  dead      list: ids of dead letters, oldest first
//	KEYS[10] err       hash: id -> why it was dead-lettered (or last given back)
//	KEYS[11] takers    zset: consumers waiting for items ("<clientID>:<n>"), scored by deadline (server ms)
//
// A paused queue has one more key, paused (KEYS[1]..':paused', the time
// it was paused): queue_pause writes it and passes it as KEYS[12],
// queue_pop as KEYS[2]; queue_take and queue_wait read it by name.
// The ready list is the queue's own key; the others are keys.Sub(key,
// name) with the names above (runtime/queue.go builds them).
type QueueScripts struct {
	Offer, Move, Take, Ack, Nack, Extend, Bury, Dead, Redrive *Script
	Peek, Remove, Drain, Delayed, Wait                        *Script
	Pause, Pop, Item                                          *Script
}

// QueueDef is the static definition of a queue declared in a spec.
type QueueDef struct {
	Name          string        // the spec's name, for errors
	Delay         bool          // items may be offered with a delay
	Reliable      bool          // deliveries are acknowledged
	Visibility    time.Duration // reliable: how long a delivery stays hidden before it is redelivered
	MaxDeliveries int           // reliable: deliveries before an item is dead-lettered
	Dedupe        time.Duration // reliable: how long a dedupe key lives (0: none)
	Retention     time.Duration // reliable: how long an acknowledged item is shown (0: not kept)
	RetainMax     int           // reliable: how many acknowledged items are kept at most
	Scripts       *QueueScripts
}

// SetUpQueue makes q (a new *runtime.Queue[T] or *runtime.ReliableQueue[T])
// the queue of def and key over c, with codec (a runtime.Codec[T]).
var SetUpQueue func(q, c any, def *QueueDef, codec any, key string)

// QueueItemAction runs an action ("remove", "run-now", "bury", "redrive")
// on the item id of q (any runtime queue), with reason (a bury's): where
// the item was ("ready", "delayed", "in-flight", "dead", or "" for none)
// and whether the action changed it.
var QueueItemAction func(ctx context.Context, q any, action, id, reason string) (was string, done bool, err error)

// Queues returns the scripts of queues (every queue uses the same set).
func (p *Pinned) Queues() *QueueScripts {
	return &QueueScripts{
		Offer: p.get("queue_offer"), Move: p.get("queue_move"), Take: p.get("queue_take"), Ack: p.get("queue_ack"),
		Nack: p.get("queue_nack"), Extend: p.get("queue_extend"), Bury: p.get("queue_bury"), Dead: p.get("queue_dead"),
		Redrive: p.get("queue_redrive"), Peek: p.get("queue_peek"), Remove: p.get("queue_remove"),
		Drain: p.get("queue_drain"), Delayed: p.get("queue_delayed"), Wait: p.get("queue_wait"),
		Pause: p.get("queue_pause"), Pop: p.get("queue_pop"), Item: p.get("queue_item"),
	}
}
