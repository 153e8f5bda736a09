package impl

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/templates"
)

// OfferRecordTTL is how long a queue operation's record lives (the
// runtime's OfferRecordTTL documents it).
const OfferRecordTTL = time.Minute

// QueueWaiterTTL is how long a waiting consumer's entry in a queue's
// takers lives after its last refresh (templates/queue.luainc's
// taker_ttl; the runtime's QueueWaiterTTL documents it).
const QueueWaiterTTL = 30 * time.Second

// QueueScripts are the scripts of queues (see lockgen's templates/queues.go
// for their calling convention). Every queue uses the same set.
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
	set := templates.Queue
	return &QueueScripts{
		Offer: p.get(set.Offer), Move: p.get(set.Move), Take: p.get(set.Take), Ack: p.get(set.Ack),
		Nack: p.get(set.Nack), Extend: p.get(set.Extend), Bury: p.get(set.Bury), Dead: p.get(set.Dead),
		Redrive: p.get(set.Redrive), Peek: p.get(set.Peek), Remove: p.get(set.Remove), Drain: p.get(set.Drain),
		Delayed: p.get(set.Delayed), Wait: p.get(set.Wait),
		Pause: p.get(set.Pause), Pop: p.get(set.Pop), Item: p.get(set.Item),
	}
}
