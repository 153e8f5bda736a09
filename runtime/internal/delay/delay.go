// Package delay is a client's delay timer: one goroutine and a heap of the
// due times of the queue instances it serves, woken by the queues'
// channels on the hub; see the comment below.
package delay

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/dueheap"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// The delay timer.
//
// Items with a due time (a delayed queue's delayed items, a reliable
// queue's visibility deadlines) sit in sorted sets scored by their due
// time on the Redis server's clock. Each client runs one scheduler: one
// goroutine and a heap of the due times of the queue instances it serves
// (it took from or offered to them, or called Start), asleep until the
// earliest. It then runs the move script of each queue that is due, which
// atomically moves what is due to the ready list, a batch at a time, and
// replies with the queue's next due time; several clients' schedulers
// racing move each item once. A scheduler learns of earlier items from
// the queue's channel: a script that adds an item due before every live
// timer would fire (the queue's armed key) publishes on it, and the hub
// hands the message to the scheduler (a watch, not a waiting goroutine).
// Nothing polls: a queue with nothing due costs nothing until a message
// comes.
//
// A queue instance is served while something is due in it or a Take of
// this client waits on it, and for idleLinger after: then the scheduler
// forgets it and drops its channel, so a client that touched many keyed
// queues holds resources only for the busy ones. Serving it again runs
// the move once more, so items that came due while no client served it
// (a crash, a restart of every client) are delivered then.
//
// The scheduler cannot use the runtime's wait loop (waitFor and waitOn):
// that loop parks one goroutine per wait until its attempt succeeds,
// listening on a fixed set of channels, while the scheduler waits on
// every served queue's channel (a set that changes as queues are served
// and forgotten) and its own heap, from one goroutine for the client's
// life. A failed move is retried after the runtime's one backoff rule
// (Backoff, which the wait loop uses too), capped at MaxRetry.

// MaxRetry bounds the wait between retries of a move that failed (and of
// a queue worker's failed take).
const MaxRetry = 5 * time.Second

// idleLinger is how long a queue instance with nothing due and no Take
// waiting stays served: a consumer's next Take usually comes sooner, and
// finds it served without another move.
const idleLinger = 5 * time.Second

// subscribeTimeout bounds the wait for a channel's subscription; a queue
// whose channel could not be subscribed is served by its due times alone,
// and subscribing is tried again at its next move.
const subscribeTimeout = 5 * time.Second

// Scheduler is a client's delay timer. Set Hub (and OnRetry) before its
// first use; the zero value is otherwise ready.
type Scheduler struct {
	// Hub is the client's pub/sub hub, on which the served queues'
	// channels are subscribed.
	Hub *hub.Hub
	// OnRetry, when set, learns of a move that failed and when it is
	// tried again (the client's observers).
	OnRetry func(q Queue, retry time.Duration, err error)

	mu      sync.Mutex
	served  map[string]*Served    // by queue key
	due     dueheap.Heap[*Served] // served queues with a due time
	pending []*Served             // queues whose move runs at the next turn
	kick    chan struct{}         // capacity 1: wakes the loop
	running bool
	closed  bool
	toSub   []*Served // queues whose channel the subscriber goroutine subscribes next
	subbing bool      // the subscriber goroutine runs
}

// Queue is a queue instance as the scheduler serves it.
type Queue interface {
	Name() string    // the spec's name, for the observers
	Key() string     // the queue's key: one entry per key
	Channel() string // where scripts announce earlier due items
	// Move moves what is due to the ready list, and returns how long
	// until the next due time (< 0: nothing due).
	Move() (time.Duration, error)
	// DueAt reads a message on Channel: the due time it announces, on
	// the local clock, when it announces one and the server's clock is
	// known (from Move's replies).
	DueAt(payload string) (time.Time, bool)
}

// Backoff is the runtime's one backoff rule: from 50 ms, doubling with
// each failure in a row, at most limit.
func Backoff(failures int, limit time.Duration) time.Duration {
	return min(50*time.Millisecond<<min(failures, 16), limit)
}

// Ready is closed once the entry's first move ran; Err is then its error.
func (e *Served) Ready() <-chan struct{} { return e.ready }

// Err is the first move's error, once Ready is closed.
func (e *Served) Err() error { return e.err }

// Served is one queue instance a scheduler serves.
type Served struct {
	q     Queue
	ready chan struct{} // closed once the first move ran
	err   error         // the first move's error, set before ready is closed

	// Guarded by the scheduler's mu.
	at      time.Time // when to run the move (or, idle, when to forget it); zero: not in the heap
	idx     int       // index in the heap, or -1
	now     bool      // run the move at the next turn (new, notified)
	first   bool      // the first move has not run yet
	idle    bool      // nothing due: at is when to forget it
	moving  bool      // its move is running
	users   int       // Takes waiting on it
	fails   int       // moves that failed in a row
	subbing bool      // a subscription is under way
	early   bool      // a move ran while subbing: run one more once subscribed
	sub     *hub.Subscription
	w       *hub.Waiter
}

// Serve returns the scheduler's entry of q, serving q if need be; with
// use, a Take counts as its user until it calls Done.
func (s *Scheduler) Serve(q Queue, use bool) *Served {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served == nil {
		s.served = map[string]*Served{}
		s.kick = make(chan struct{}, 1)
	}
	e := s.served[q.Key()]
	if s.closed {
		e = &Served{q: q, ready: make(chan struct{}), idx: -1, err: impl.ErrClosed}
		close(e.ready)
		return e
	}
	if e == nil {
		e = &Served{q: q, ready: make(chan struct{}), idx: -1, first: true}
		s.served[q.Key()] = e
		s.subscribe(e)
	}
	if use {
		e.users++
		if e.idle {
			e.idle = false
			s.unschedule(e)
		}
	}
	if !s.running {
		s.running = true
		go s.run()
	}
	return e
}

// done ends a use taken by serve.
func (s *Scheduler) Done(e *Served) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.users--
	if e.users == 0 && e.at.IsZero() && !e.now && !e.first && s.served[e.q.Key()] == e {
		s.idleLocked(e)
	}
}

// expect tells the scheduler that q has an item due at t (on the local
// clock): the offer of a delayed item, the claim of a delivery.
func (s *Scheduler) Expect(e *Served, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served[e.q.Key()] != e {
		return // forgotten meanwhile
	}
	// (Also before its first move: when many queues are served at once,
	// their first moves may come after this due time.)
	if e.idle || e.at.IsZero() || t.Before(e.at) {
		e.idle = false
		s.schedule(e, t)
		s.wake()
	}
}

// notify handles a message on q's channel: an item due at the time it
// announces, when that is later (on the server's clock as the queue knows
// it) and the first move ran, re-arms q's timer for then; anything else
// runs q's move at the next turn. (A move at once would find nothing due
// yet: every delayed offer announces its item when no timer is armed
// for it.) The hub calls it with its own lock held.
func (s *Scheduler) notify(e *Served, payload string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served[e.q.Key()] != e {
		return
	}
	if t, ok := e.q.DueAt(payload); ok && !e.first && time.Until(t) > time.Millisecond {
		if e.idle || e.at.IsZero() || t.Before(e.at) {
			if e.moving {
				// Its move replies with the next due time, maybe before
				// this message's: run it again then, to be sure.
				s.runNow(e)
				return
			}
			e.idle = false
			s.schedule(e, t)
			s.wake()
		}
		return
	}
	s.runNow(e)
}

// runNow makes the next turn run e's move. s.mu must be held.
func (s *Scheduler) runNow(e *Served) {
	if !e.now {
		e.now = true
		s.pending = append(s.pending, e)
	}
	s.wake()
}

func (s *Scheduler) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// subscribe subscribes to e's channel in the background: the first move
// runs once the subscription is confirmed (or failed), so that an earlier
// item announced after it replies is heard. One goroutine subscribes
// what is pending, many channels at once (10 000 keyed queues served
// together cost one goroutine, not one each). s.mu must be held.
func (s *Scheduler) subscribe(e *Served) {
	if e.sub != nil || e.subbing {
		return
	}
	e.subbing = true
	s.toSub = append(s.toSub, e)
	if !s.subbing {
		s.subbing = true
		go s.subscriber()
	}
}

// subscriber subscribes the channels of the entries pending in toSub, a
// batch at a time, until none is left.
func (s *Scheduler) subscriber() {
	h := s.Hub
	for {
		s.mu.Lock()
		batch := s.toSub
		s.toSub = nil
		if len(batch) == 0 {
			s.subbing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		channels := make([]string, len(batch))
		for i, e := range batch {
			channels[i] = e.q.Channel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		subs, errs := h.SubscribeMany(ctx, channels)
		cancel()
		for i, e := range batch {
			s.subscribed(e, subs[i], errs[i])
		}
	}
}

// subscribed records the outcome of e's subscription: sub, or err.
func (s *Scheduler) subscribed(e *Served, sub *hub.Subscription, err error) {
	h := s.Hub
	var w *hub.Waiter
	if err == nil {
		w = h.Watch(sub, func(payload string) { s.notify(e, payload) })
	}
	s.mu.Lock()
	e.subbing = false
	live := s.served[e.q.Key()] == e
	if live && err == nil {
		e.sub, e.w = sub, w
	}
	switch {
	case e.first && errors.Is(err, impl.ErrClosed):
		e.first, e.err = false, err
		close(e.ready)
	case live && (e.first || e.early):
		// (A move before the subscription may have missed an
		// announcement made between its reply and the subscription.)
		e.early = false
		s.runNow(e)
	}
	s.mu.Unlock()
	if !live && err == nil {
		h.Leave(sub, w, true)
		h.Unsubscribe(sub)
	}
}

// schedule puts e in the heap at t. s.mu must be held.
func (s *Scheduler) schedule(e *Served, t time.Time) {
	e.at = t
	if e.idx >= 0 {
		heap.Fix(&s.due, e.idx)
	} else {
		heap.Push(&s.due, e)
	}
}

// unschedule takes e out of the heap. s.mu must be held.
func (s *Scheduler) unschedule(e *Served) {
	if e.idx >= 0 {
		heap.Remove(&s.due, e.idx)
	}
	e.at = time.Time{}
}

// idleLocked marks e idle: forgotten after idleLinger unless used or
// given a due time meanwhile. s.mu must be held.
func (s *Scheduler) idleLocked(e *Served) {
	e.idle = true
	s.schedule(e, time.Now().Add(idleLinger))
}

// run is the scheduler's goroutine: it ends when the client is closed.
func (s *Scheduler) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	closed := s.Hub.Closed()
	for {
		moves, forget, next := s.turn()
		for _, f := range forget {
			s.Hub.Leave(f.sub, f.w, true)
			s.Hub.Unsubscribe(f.sub)
		}
		s.runMoves(moves)
		if len(moves) > 0 {
			continue // a move may have made another one due
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-s.kick:
		case <-timer.C:
		case <-closed:
			s.Close()
			return
		}
	}
}

// MaxMoves bounds how many moves the scheduler runs at once: queues due
// together (many keyed queues whose items came due in the same
// millisecond) are moved in parallel, their scripts sent together in the
// client's lane of moves (rdb.Lane: a few pipelines at a time, so that
// the pool keeps connections for the client's other calls).
const MaxMoves = 256

// runMoves runs the moves of the given queues, up to MaxMoves at once, and
// returns when all have run.
func (s *Scheduler) runMoves(moves []*Served) {
	move := func(e *Served) {
		d, err := e.q.Move()
		if retry := s.moved(e, d, err); err != nil && s.OnRetry != nil {
			s.OnRetry(e.q, retry, err)
		}
	}
	if len(moves) == 1 {
		move(moves[0])
		return
	}
	next := make(chan *Served)
	var wg sync.WaitGroup
	for range min(len(moves), MaxMoves) {
		wg.Go(func() {
			for e := range next {
				move(e)
			}
		})
	}
	for _, e := range moves {
		next <- e
	}
	close(next)
	wg.Wait()
}

// turn takes the queues whose move is due and the idle ones to forget,
// and returns when the next is due (zero: none). Queues due by time come
// first, then those to move at once (a first move, a notification), at
// most maxTurn in all: the rest wait for the next turn, so that 10 000
// queues served at once (Takes on as many keyed queues) do not hold back
// the moves that come due meanwhile.
func (s *Scheduler) turn() (moves []*Served, forget []forgotten, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for len(s.due) > 0 && !s.due[0].at.After(now) && len(moves) < maxTurn {
		e := heap.Pop(&s.due).(*Served)
		e.at = time.Time{}
		if !e.idle {
			e.moving = true
			moves = append(moves, e)
			continue
		}
		e.idle = false
		if e.users == 0 {
			delete(s.served, e.q.Key())
			if e.sub != nil {
				forget = append(forget, forgotten{e.sub, e.w})
			}
		}
	}
	taken := 0
	for _, e := range s.pending {
		if len(moves) >= maxTurn {
			break
		}
		taken++
		e.now = false
		if s.served[e.q.Key()] == e && !e.moving { // (not due by time as well)
			e.idle = false
			s.unschedule(e)
			e.moving = true
			moves = append(moves, e)
		}
	}
	rest := copy(s.pending, s.pending[taken:])
	clear(s.pending[rest:])
	s.pending = s.pending[:rest]
	if len(s.due) > 0 {
		next = s.due[0].at
	}
	return moves, forget, next
}

// maxTurn is the most moves one turn of the scheduler runs.
const maxTurn = 2 * MaxMoves

// forgotten is the subscription of a queue the scheduler forgot.
type forgotten struct {
	sub *hub.Subscription
	w   *hub.Waiter
}

// moved records the result of e's move: its next due time in d (< 0:
// nothing due), or the move's error; it returns when a failed move is
// retried.
func (s *Scheduler) moved(e *Served, d time.Duration, err error) (retry time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.moving = false
	if e.first {
		e.first = false
		e.err = err
		close(e.ready)
	}
	if s.served[e.q.Key()] != e {
		return 0
	}
	if e.sub == nil {
		e.early = e.early || e.subbing
		s.subscribe(e) // it failed before: try again
	}
	if err != nil {
		retry = Backoff(e.fails, MaxRetry)
		e.fails++
		d = retry
	} else {
		e.fails = 0
	}
	switch {
	case e.now:
		// notified while moving: the next turn runs it again
	case d >= 0:
		s.schedule(e, time.Now().Add(d))
	case e.users == 0:
		s.idleLocked(e)
	}
	return retry
}

// close releases what the scheduler holds when the client is closed.
func (s *Scheduler) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, e := range s.served {
		if e.first {
			e.first = false
			e.err = impl.ErrClosed
			close(e.ready)
		}
	}
	s.served = map[string]*Served{}
	s.due = nil
	s.pending = nil
}

func (e *Served) Due() time.Time { return e.at }
func (e *Served) SetIndex(i int) { e.idx = i }

// Moving reports whether the scheduler has a move pending or running (a
// move scheduled for later does not count), for tests.
func (s *Scheduler) Moving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 {
		return true
	}
	for _, e := range s.served {
		if e.moving || e.now || e.first {
			return true
		}
	}
	return false
}

// Busy reports whether the scheduler has a move due, pending or running
// (a served queue that is only lingering idle does not count), for tests.
func (s *Scheduler) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 {
		return true
	}
	for _, e := range s.served {
		if e.moving || e.now || e.first || (e.idx >= 0 && !e.idle) {
			return true
		}
	}
	return false
}
