package inspect

import (
	"strconv"
	"strings"

	"github.com/lockgen/lockgen/runtime"
)

// Instance is the live state of one object instance.
type Instance struct {
	Object string  `json:"object"`
	Kind   string  `json:"kind"`
	Key    string  `json:"key"`
	Params []Param `json:"params"`

	// The instance's state: one field per kind, set by the kind's read.
	Lock      *LockState      `json:"lock,omitempty"`
	Semaphore *SemaphoreState `json:"semaphore,omitempty"`
	Latch     *LatchState     `json:"latch,omitempty"`
	Limiter   *LimiterState   `json:"limiter,omitempty"`
	Queue     *QueueState     `json:"queue,omitempty"`
	Schedule  *ScheduleState  `json:"schedule,omitempty"` // schedule.go
}

// Totals add up an object's instances (each kind its own, see kind.total).
type Totals struct {
	Held     int   `json:"held,omitempty"`     // locks held; semaphore permits in use
	Holders  int   `json:"holders,omitempty"`  // holds (a read-write lock's readers count one each)
	Waiters  int   `json:"waiters,omitempty"`  // known waiters
	Capacity int   `json:"capacity,omitempty"` // semaphores: permits in all
	Ready    int64 `json:"ready,omitempty"`
	Delayed  int64 `json:"delayed,omitempty"`
	InFlight int64 `json:"inFlight,omitempty"`
	Dead     int64 `json:"dead,omitempty"`
	Paused   int   `json:"paused,omitempty"`    // queue and schedule instances paused
	Open     int   `json:"open,omitempty"`      // latches open
	Empty    int   `json:"exhausted,omitempty"` // limiter allowances with nothing left
}

// Param is one decoded param value, as the generated code formatted it.
type Param struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// LockState is a lock's holders and waiters. Times are milliseconds left,
// by the Redis server's clock.
type LockState struct {
	Held    bool     `json:"held"`
	Holders []Holder `json:"holders,omitempty"`
	// LastToken is a fenced lock's counter: the token of the latest hold,
	// by any owner (it never expires).
	LastToken int64    `json:"lastToken,omitempty"`
	Waiters   []Waiter `json:"waiters,omitempty"`
}

// Holder is one hold of a lock or semaphore.
type Holder struct {
	Owner  string `json:"owner"`  // "<client id>:<n>"
	Client string `json:"client"` // the owner's client id
	// Side is "read" or "write" for read-write locks.
	Side    string `json:"side,omitempty"`
	Holds   int    `json:"holds,omitempty"`   // re-entries of one owner
	Permits int    `json:"permits,omitempty"` // semaphores
	Token   int64  `json:"token,omitempty"`   // fenced locks
	// TTLMs is the time left on the hold's lease; -1 when it has none.
	TTLMs int64 `json:"ttlMs"`
}

// Waiter is one owner waiting for an object, from the object's waiter
// registry (key:queue in arrival order, key:waiters with deadlines; see
// "Waiter registry" in the runtime's package doc).
type Waiter struct {
	Owner  string `json:"owner"`
	Client string `json:"client"`
	// Side is "read" or "write" for read-write locks.
	Side string `json:"side,omitempty"`
	// Permits is how many permits a semaphore's waiter wants.
	Permits int `json:"permits,omitempty"`
	// TTLMs is the time until the waiter loses its place unless it
	// refreshes it.
	TTLMs int64 `json:"ttlMs"`
}

// SemaphoreState is a semaphore's permits.
type SemaphoreState struct {
	Capacity int      `json:"capacity"`
	Held     int      `json:"held"`
	Free     int      `json:"free"`
	Holders  []Holder `json:"holders,omitempty"`
	Waiters  []Waiter `json:"waiters,omitempty"`
	// CapacitySet reports an operator's capacity (SetPermits) in place of
	// the spec's.
	CapacitySet bool `json:"capacitySet,omitempty"`
}

// LatchState is a count-down latch's count.
type LatchState struct {
	Set   bool  `json:"set"` // counted down or set; else Count is the spec's
	Count int   `json:"count"`
	Open  bool  `json:"open"`
	TTLMs int64 `json:"ttlMs"` // until the key expires and the latch starts over
}

// LimiterState is a limiter's allowance, one entry per client for the
// per-client scope.
type LimiterState struct {
	Algorithm string           `json:"algorithm"`
	Scope     string           `json:"scope"`
	Capacity  int              `json:"capacity"`
	Clients   []LimiterReading `json:"clients"`
}

// LimiterReading is one allowance of a limiter.
type LimiterReading struct {
	Client       string `json:"client,omitempty"` // per-client scope only
	Remaining    int    `json:"remaining"`
	ResetAfterMs int64  `json:"resetAfterMs"`
	Error        string `json:"error,omitempty"` // e.g. a config mismatch
}

// QueueState is a queue's depths and the items an operator looks at.
type QueueState struct {
	Ready    int64 `json:"ready"`
	Delayed  int64 `json:"delayed"`
	InFlight int64 `json:"inFlight"`
	Dead     int64 `json:"dead"`
	// NextDueMs is how long until the earliest delayed item is due (0
	// when one is overdue); absent with nothing delayed.
	NextDueMs *int64 `json:"nextDueMs,omitempty"`
	// Paused reports that the queue's consumers are paused (the runtime's
	// Pause): its Takes take nothing until it is resumed. PausedForMs is
	// how long it has been paused.
	Paused      bool   `json:"paused,omitempty"`
	PausedForMs *int64 `json:"pausedForMs,omitempty"`
	// ReadyItems are the first ready items, first ready first (the next
	// Take's first). A plain queue's ready items have no id.
	ReadyItems []QueueItem `json:"readyItems,omitempty"`
	// DelayedItems are the first delayed items, due first first, with
	// DueMs.
	DelayedItems []QueueItem  `json:"delayedItems,omitempty"`
	Deliveries   []Delivery   `json:"deliveries,omitempty"`  // in flight, earliest deadline first
	DeadLetters  []DeadLetter `json:"deadLetters,omitempty"` // oldest first
	// Completed are the items acknowledged within the spec's retention
	// window, newest first (a queue with retention: { for: ... }), with
	// DoneAgoMs.
	Completed []QueueItem `json:"completed,omitempty"`
}

// Delivery is an item in flight on a reliable queue.
type Delivery struct {
	ID string `json:"id"`
	// Deliveries is the attempt in flight: 1 for the item's first
	// delivery.
	Deliveries int   `json:"deliveries"`
	DeadlineMs int64 `json:"deadlineMs"` // until it is delivered again
	// Body is the item's codec bytes, as in DeadLetter.
	Body string `json:"body,omitempty"`
	// Unique is the key it was enqueued under, as in DeadLetter.
	Unique string `json:"unique,omitempty"`
}

// Item states, as QueueItem.State and ItemResult.Was report them.
const (
	ItemReady    = "ready"
	ItemDelayed  = "delayed"
	ItemInFlight = "in-flight"
	ItemDead     = "dead"
	ItemDone     = "done" // acknowledged, kept by the queue's retention
)

// QueueItem is one item of a queue: a ready or delayed one in a listing,
// or the item Item found by its id, wherever it is.
type QueueItem struct {
	// ID is the item's id: Enqueue's, Delivery.ID's, the one the item
	// actions take. A plain queue's ready items have none ("").
	ID string `json:"id,omitempty"`
	// State is ItemReady, ItemDelayed, ItemInFlight or ItemDead.
	State string `json:"state"`
	// Deliveries is how many deliveries the item had (a reliable queue's
	// item given back or redelivered); for one in flight, the attempt.
	Deliveries int `json:"deliveries,omitempty"`
	// DueMs is how long until a delayed item is due (0 when it is
	// overdue: the next timer run moves it).
	DueMs *int64 `json:"dueMs,omitempty"`
	// DeadlineMs is how long until an item in flight is delivered again.
	DeadlineMs *int64 `json:"deadlineMs,omitempty"`
	// DoneAgoMs is how long ago a completed item was acknowledged.
	DoneAgoMs *int64 `json:"doneAgoMs,omitempty"`
	// Reason is why a dead letter is dead.
	Reason string `json:"reason,omitempty"`
	// Body, Codec and Carried are as in DeadLetter.
	Body    string            `json:"body"`
	Codec   string            `json:"codec,omitempty"`
	Carried map[string]string `json:"carried,omitempty"`
	// Unique is the key it was enqueued under, as in DeadLetter.
	Unique string `json:"unique,omitempty"`
}

// DeadLetter is an item on a queue's dead-letter list.
type DeadLetter struct {
	ID         string `json:"id"`
	Reason     string `json:"reason"`
	Deliveries int    `json:"deliveries"`
	// Body is the codec's bytes, out of the item's envelope (the whole
	// item as stored when the envelope does not decode), cut at 200 bytes.
	Body string `json:"body"`
	// Codec is the codec's tag in the envelope ("j" json, "b" bytes, "s"
	// string, "p" protobuf, "c" custom); empty for an item from before
	// the envelope or one whose envelope does not decode.
	Codec string `json:"codec,omitempty"`
	// Carried is what the item carries from its producer, such as the
	// W3C traceparent of the Offer's span (see runtime.ItemPropagator).
	Carried map[string]string `json:"carried,omitempty"`
	// Unique is the key the item was enqueued under (the runtime's
	// Unique or WithKey: asynq's task id), "" when none; Carried holds it
	// too, as runtime.UniqueKeyField.
	Unique string `json:"unique,omitempty"`
}

// deadLetter returns the dead letter id with its stored item raw.
func deadLetter(id string, raw, reason string, deliveries int) DeadLetter {
	d := DeadLetter{ID: id, Reason: reason, Deliveries: deliveries}
	d.Body, d.Codec, d.Carried = splitBody(raw)
	d.Unique = d.Carried[runtime.UniqueKeyField]
	return d
}

// queueItem returns the item id in state with its stored item raw.
func queueItem(id, state, raw string, deliveries int) QueueItem {
	it := QueueItem{ID: id, State: state, Deliveries: deliveries}
	it.Body, it.Codec, it.Carried = splitBody(raw)
	it.Unique = it.Carried[runtime.UniqueKeyField]
	return it
}

// splitBody returns the codec's bytes of a stored item (cut at 200
// bytes), its codec's tag and what it carries, out of its envelope; the
// whole item as stored when the envelope does not decode.
func splitBody(raw string) (body, codec string, carried map[string]string) {
	tag, fields, payload, err := runtime.SplitItem([]byte(raw))
	if err != nil {
		return cut(raw, 200), "", nil
	}
	if tag != 0 {
		codec = string(rune(tag))
	}
	return cut(string(payload), 200), codec, fields
}

// splitOwner returns the client id of an owner id "<client>:<n>".
func splitOwner(owner string) string {
	if i := strings.LastIndexByte(owner, ':'); i > 0 {
		if _, err := strconv.ParseUint(owner[i+1:], 10, 64); err == nil {
			return owner[:i]
		}
	}
	return owner
}

func holder(owner string) Holder { return Holder{Owner: owner, Client: splitOwner(owner)} }

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// waiter parses a registry member: "<owner>", "<owner> r|w" (read-write
// locks) or "<owner> <permits>" (semaphores).
func waiter(member string, ttl int64) Waiter {
	owner, detail, _ := strings.Cut(member, " ")
	w := Waiter{Owner: owner, Client: splitOwner(owner), TTLMs: ttl}
	switch detail {
	case "r":
		w.Side = "read"
	case "w":
		w.Side = "write"
	default:
		w.Permits, _ = strconv.Atoi(detail)
	}
	return w
}
