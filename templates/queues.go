package templates

// The queue layout. Every queue script takes the same KEYS, all sub-keys
// of the queue's key and so in one slot (each script's header names them
// and states its ARGV and reply; ARGV[1] is always the command that
// publishes on the queue's timer channel, KEYS[1]..':ch'):
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

// QueueSet names the scripts of queues.
type QueueSet struct {
	Offer, Move, Take, Ack, Nack, Extend, Bury, Dead, Redrive string
	Peek, Remove, Drain, Delayed, Wait                        string
	Pause, Pop, Item                                          string
}

// Names returns the set's script names in a fixed order.
func (s QueueSet) Names() []string {
	return []string{s.Offer, s.Move, s.Take, s.Ack, s.Nack, s.Extend, s.Bury, s.Dead, s.Redrive, s.Peek, s.Remove, s.Drain, s.Delayed, s.Wait, s.Pause, s.Pop, s.Item}
}

// Queue names the scripts of queues: every queue uses the same set.
var Queue = QueueSet{
	Offer:   "queue_offer",
	Move:    "queue_move",
	Take:    "queue_take",
	Ack:     "queue_ack",
	Nack:    "queue_nack",
	Extend:  "queue_extend",
	Bury:    "queue_bury",
	Dead:    "queue_dead",
	Redrive: "queue_redrive",
	Peek:    "queue_peek",
	Remove:  "queue_remove",
	Drain:   "queue_drain",
	Delayed: "queue_delayed",
	Wait:    "queue_wait",
	Pause:   "queue_pause",
	Pop:     "queue_pop",
	Item:    "queue_item",
}
