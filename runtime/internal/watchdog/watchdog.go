// Package watchdog renews a client's holds (or a RedLock quorum's): one
// goroutine per watchdog, woken at the earliest renewal due, renewing in
// pipelines of at most MaxPipeline commands, and ending each hold's
// holders' contexts when a renewal finds it lost or its local expiry
// passes first. Package runtime registers its leases and permits here
// (as Holders) and supplies the function that runs one pipeline.
package watchdog

import (
	"container/heap"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/dueheap"
	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// RenewEvery is how often a hold with the given lease is renewed: every
// lease/3, so that two renewals in a row may fail (or come late) before the
// lease runs out. Every renewable kind is renewed on this schedule, by the
// watchdog.
func RenewEvery(lease time.Duration) time.Duration { return lease / 3 }

// MaxPipeline bounds the commands of one Renewal pipeline (per node on a
// cluster or a RedLock quorum). Redis reads a client's pipeline 16 KB at a
// time and runs each such chunk between the other clients' commands; one
// Renewal is about 250 bytes and 5 µs of Redis time, so a chunk holds
// about 66 of them, 0.3 ms (BenchmarkWatchdog in scripts/bench measures
// both). 64 renewals fit one chunk: a whole pipeline is one stretch of at
// most about 0.3 ms during which another client's command waits, far
// under the 2 ms bound, and the client never has more than 64 replies in
// flight.
const MaxPipeline = 64

// watchdog renews every renewable hold of one client (or of one RedLock
// quorum): one goroutine, running while something is held and at least
// Linger after, woken at the earliest Renewal due. A hold is
// renewed every RenewEvery(lease), up to a quarter of that early so that
// holds due about the same time share pipelines. The holds due are sent in pipelines of at most
// MaxPipeline commands, one at a time; while the holds due next are not
// late yet, each pipeline is followed by a pause as long as it took. So a
// client holding 50 000 locks spreads their renewals over the interval
// instead of stalling the Redis (and its other clients) with one huge
// pipeline, and catches up at full speed when it fell behind.
//
// Each hold also has a local expiry, moved on by every successful
// Renewal: if Redis cannot be reached until the lease would have run out,
// the holders learn it then, before anyone else can take the lock. The
// expiries are kept in a heap of their own, served by one timer per
// watchdog (a hold costs no timer).
//
// A new owner's hold starts young (addNew): a node its Holder keeps,
// linked in a list, out of the map and both heaps and without an entry of
// its own, with the expiry timer and run's timer armed no later than it
// needs; run, expire, close and every re-entry (add) promote the young
// holds first (making their entries), so each finds every hold where it
// looks (a chunk at a time: see promoteChunk).
type Watchdog struct {
	// renew runs one pipeline's renewals, sent at sent, and sets each
	// one's outcome.
	renew func(ctx context.Context, batch []*Held, sent time.Time)

	mu      sync.Mutex
	entries map[Key]*Held
	queue   dueheap.Heap[*Held] // the entries not being renewed right now, by next
	// young are the holds of new owners added since run last looked (see
	// addNew): in neither entries nor the heaps, and without an entry, so
	// that a Lock+Unlock that ends before then costs the watchdog a link
	// and an unlink. youngNext is no later than their earliest Renewal.
	young     youngList
	youngNext time.Time
	// expiries holds every entry (not the young) by its local expiry; expTimer (made
	// on the first add) fires at expArmed, the earliest as it was then.
	expiries dueheap.Heap[*expiry]
	expTimer *time.Timer
	expArmed time.Time
	closed   bool
	running  bool        // run's goroutine is alive
	starts   int         // run's goroutines started (for tests)
	idle     time.Time   // when run found nothing held; zero since the last hold went
	armed    time.Time   // when run's timer fires; zero while idle
	timer    *time.Timer // run's, while it sleeps until armed (nil: it is not asleep)
	done     chan struct{}
	wg       sync.WaitGroup

	// OnLost, when set, learns of every hold found lost (not of those
	// ended by Close), with the object's name: the client's observers.
	OnLost func(object string, cause error)
}

// Key identifies one hold in Redis: a key and the owner holding it
// (for a permit or a read lease, whatever the script names it by).
type Key struct{ Key, Owner string }

// Renewal says how to renew one hold: Script is run with Keys and Args
// and must return 1 when the hold was extended by Lease, 0 when it is
// gone. The hold is renewed every RenewEvery(Lease).
type Renewal struct {
	Object string // the spec's name, for the observers
	Script *impl.Script
	Keys   []string
	Args   []any
	// ArgsOf, when Args is nil, makes Args at the first Renewal: an
	// uncontended Lock+Unlock never renewed does not build them.
	ArgsOf interface{ RenewArgs() []any }
	Lease  time.Duration
	// Valid is how long after a Renewal was sent the hold counts as held
	// (0: Lease). A RedLock trusts its lease less the clock drift.
	Valid time.Duration
	// Nodes returns the RedLock nodes to renew the hold on (nil: all).
	Nodes func() []int
	// First, when set, is a shorter lease the hold has until its first
	// Renewal (a lock a release handed to a waiter): that Renewal is due
	// within RenewEvery(First), and the hold counts as held for First.
	First time.Duration
}

// ValidFor is how long after a renewal was sent the hold counts as held.
func (r Renewal) ValidFor() time.Duration {
	if r.Valid > 0 {
		return r.Valid
	}
	return r.Lease
}

// Holder is what learns that a hold ended: a *Lease, a permit, ...
type Holder interface {
	// Cancel ends the holder's context with cause.
	Cancel(cause error)
	// Extend moves the holder's local deadline to until after a renewal
	// or re-entry; false: its deadline had passed already.
	Extend(until time.Time) bool
}

// Outcome is what one renewal found.
type Outcome int

const (
	Again   Outcome = iota // no answer: retry soon, the expiry timer ends it if this lasts
	Renewed                // extended
	Lost                   // gone or taken over: impl.ErrLockLost
	Closed                 // a client it needs was closed: impl.ErrClosed
)

// Held is one hold and its holders: the leases of nested re-entries of
// one owner share it.
type Held struct {
	k       Key
	Renew   Renewal   // how it is renewed
	holders []Holder  // each once; usually one: in one, no allocation
	one     [1]Holder // holders' first array
	next    time.Time // next Renewal
	// first is Renew.First until the hold's first Renewal or re-entry
	// extends it to its lease, then 0 (h.Renew is not written once made:
	// a RedLock's renewals read it after renew returned).
	first time.Duration
	index int    // in the due queue; -1 while being renewed
	exp   expiry // when the lease would have run out unrenewed

	Outcome Outcome // of its last renewal, set by the renew function
}

// Young is a new owner's hold while it is young (see addNew): a node
// of w.young that its Holder keeps, so that a hold released before the
// watchdog looks costs no entry (a held, 272 bytes). Promotion makes the
// entry from what the Holder says then.
type Young struct {
	prev, next *Young
	hd         YoungHolder   // while linked; nil otherwise
	first      time.Duration // Renewal.First of the hold
}

// YoungHolder is a Holder whose hold can start young (a Lease): it keeps
// the node, and tells at promotion the hold's key, how it is renewed
// (Renewal.First aside, kept in the node) and when it was taken.
type YoungHolder interface {
	Holder
	YoungNode() *Young
	Promoted() (Key, Renewal, time.Time)
}

// youngList is an intrusive list of young holds (watchdog.young).
type youngList struct{ head, tail *Young }

func (l *youngList) push(y *Young, hd YoungHolder) {
	y.prev, y.next, y.hd = l.tail, nil, hd
	if l.tail != nil {
		l.tail.next = y
	} else {
		l.head = y
	}
	l.tail = y
}

func (l *youngList) unlink(y *Young) {
	if y.prev != nil {
		y.prev.next = y.next
	} else {
		l.head = y.next
	}
	if y.next != nil {
		y.next.prev = y.prev
	} else {
		l.tail = y.prev
	}
	y.prev, y.next, y.hd = nil, nil, nil
}

// extendAll extends every Holder of h to until; false when one's deadline
// had passed already.
func extendAll(h *Held, until time.Time) bool {
	for _, hd := range h.holders {
		if !hd.Extend(until) {
			return false
		}
	}
	return true
}

func (h *Held) Due() time.Time { return h.next }
func (h *Held) SetIndex(i int) { h.index = i }

// expiry is a held's entry in the watchdog's expiry heap.
type expiry struct {
	h     *Held
	at    time.Time
	index int // in w.expiries; -1 when not there
}

func (e *expiry) Due() time.Time { return e.at }
func (e *expiry) SetIndex(i int) { e.index = i }

// setExpiry moves h's local expiry to at and arms the expiry timer when
// that is earlier than it fires; w.mu is held.
func (w *Watchdog) setExpiry(h *Held, at time.Time) {
	h.exp.h, h.exp.at = h, at
	if h.exp.index >= 0 {
		heap.Fix(&w.expiries, h.exp.index)
	} else {
		heap.Push(&w.expiries, &h.exp)
	}
	w.armExpiry(at)
}

// armExpiry makes the expiry timer fire at at or sooner; w.mu is held.
func (w *Watchdog) armExpiry(at time.Time) {
	if w.expTimer == nil {
		w.expTimer = time.AfterFunc(time.Until(at), w.expire)
		w.expArmed = at
	} else if w.expArmed.IsZero() || at.Before(w.expArmed) {
		w.expTimer.Reset(time.Until(at))
		w.expArmed = at
	}
}

// expire runs on the expiry timer: every hold whose local expiry passed
// is lost (impl.ErrLockLost), and the timer is armed for the next expiry.
func (w *Watchdog) expire() {
	w.mu.Lock()
	w.promote()
	now := time.Now()
	var gone []*Held
	for len(w.expiries) > 0 && !w.expiries[0].at.After(now) {
		gone = append(gone, heap.Pop(&w.expiries).(*expiry).h)
	}
	w.expArmed = time.Time{}
	if len(w.expiries) > 0 && !w.closed {
		w.expArmed = w.expiries[0].at
		w.expTimer.Reset(time.Until(w.expArmed))
	}
	w.mu.Unlock()
	for _, h := range gone {
		w.lose(h, impl.ErrLockLost)
	}
}

// RenewOutcome says what the reply of one Renewal script means. The
// replies, as the scripts' headers state them:
//
//	reentrant_renew reply: int
//	simple_renew reply: int
//	fair_renew reply: int
//	rw_renew reply: int
//	semaphore_renew reply: int
func RenewOutcome(cmd *redis.Cmd) Outcome {
	switch n, err := cmd.Int(); {
	case err != nil:
		return Again
	case n == 1:
		return Renewed
	}
	return Lost
}

func New(renew func(ctx context.Context, batch []*Held, sent time.Time)) *Watchdog {
	return &Watchdog{
		renew:   renew,
		entries: map[Key]*Held{},
		done:    make(chan struct{}),
	}
}

// RenewOn runs the renewals of batch in one pipeline on rdb (one per node
// of a cluster) and returns their replies; the scripts Redis does not
// know are sent again with their source. also, when not nil, queues
// commands of the caller's in the first pipeline (a heartbeat), whose
// replies the caller reads from its own commands.
func RenewOn(ctx context.Context, rdb redis.Cmdable, batch []*Held, also func(redis.Pipeliner)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(batch))
	exec := func(idx []int, source bool) {
		pipe := rdb.Pipeline()
		if also != nil && !source {
			also(pipe)
		}
		for _, i := range idx {
			r := batch[i].Renew
			if source {
				cmds[i] = pipe.Eval(ctx, r.Script.Source, r.Keys, r.Args...)
			} else {
				cmds[i] = pipe.EvalSha(ctx, r.Script.SHA1, r.Keys, r.Args...)
			}
		}
		_, _ = pipe.Exec(ctx) // errors are per command
	}
	idx := make([]int, len(batch))
	for i := range idx {
		idx[i] = i
	}
	exec(idx, false)
	var noScript []int
	for i, cmd := range cmds {
		if cmd.Err() != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			noScript = append(noScript, i)
		}
	}
	if len(noScript) > 0 {
		exec(noScript, true)
	}
	return cmds
}

// add registers Holder of the hold k, taken (or re-entered) at start; it
// returns impl.ErrClosed when the client is closed. A hold's first Holder sets
// how it is renewed.
func (w *Watchdog) Add(k Key, r Renewal, hd Holder, start time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.promote() // a re-entry finds its hold in entries
	if w.closed {
		return impl.ErrClosed
	}
	h := w.entries[k]
	if h == nil {
		h = newHeld(k, r, hd, start)
		w.keep(h)
	} else {
		// A re-entry extends the hold in Redis to its lease (a hand-off's
		// First with it).
		h.first = 0
		w.setExpiry(h, start.Add(h.Renew.ValidFor()))
		for _, hd := range h.holders {
			hd.Extend(start.Add(h.Renew.ValidFor()))
		}
		if next := start.Add(RenewEvery(h.Renew.Lease)); next.Before(h.next) {
			h.next = next
			if h.index >= 0 {
				heap.Fix(&w.queue, h.index)
			}
		}
		if !slices.Contains(h.holders, hd) {
			h.holders = append(h.holders, hd)
		}
	}
	w.wake(h.next)
	return nil
}

// addNew is add for the hold of an owner made for this acquire, which no
// other hold can share, renewed as r says and taken at start: it is kept
// in w.young, in the node hd keeps, out of entries and the heaps, until
// run next looks (promote). An uncontended Lock+Unlock so costs the
// watchdog a link and an unlink, no entry, map or heap operation. Its
// local expiry arms the expiry timer all the same: expire promotes the
// young holds before it looks.
func (w *Watchdog) AddNew(r Renewal, hd YoungHolder, start time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return impl.ErrClosed
	}
	y := hd.YoungNode()
	y.first = r.First
	w.young.push(y, hd)
	next, exp := schedule(r, start)
	if w.youngNext.IsZero() || next.Before(w.youngNext) {
		w.youngNext = next
	}
	w.armExpiry(exp)
	w.wake(next)
	return nil
}

// schedule returns the first Renewal and the local expiry of a hold
// renewed as r says, taken at start.
func schedule(r Renewal, start time.Time) (next, exp time.Time) {
	every, valid := interval(r, r.First)
	return start.Add(every), start.Add(valid)
}

// interval returns how often a hold renewed as r says is renewed until its
// next Renewal, and how long it counts as held since its start or last
// Renewal, while its first Renewal is pending with a lease of first
// (Renewal.First; 0 once renewed or re-entered: Held.first):
// RenewEvery(first) and first when first is the shorter.
func interval(r Renewal, first time.Duration) (every, valid time.Duration) {
	every, valid = RenewEvery(r.Lease), r.ValidFor()
	if first > 0 && first < valid {
		every, valid = RenewEvery(first), first
	}
	return every, valid
}

// newHeld returns the entry of hold k with its first Holder hd, taken at
// start, its next Renewal and local expiry set.
func newHeld(k Key, r Renewal, hd Holder, start time.Time) *Held {
	h := &Held{k: k, Renew: r, first: r.First, index: -1}
	h.exp.index = -1
	h.one[0] = hd
	h.holders = h.one[:1]
	h.next, h.exp.at = schedule(r, start)
	h.exp.h = h
	return h
}

// wake makes sure run renews a hold due at next in time: it starts run,
// or moves its timer when it would fire too late (neither a Lock nor a
// hand-off, due within a third of HandoffLease, costs a goroutine
// switch; while run is awake it picks the hold up before it sleeps);
// w.mu is held.
func (w *Watchdog) wake(next time.Time) {
	if !w.running {
		w.running = true
		w.armed = next
		w.wg.Add(1)
		w.starts++
		go w.run()
		return
	}
	if w.timer != nil && (w.armed.IsZero() || next.Before(w.armed)) {
		w.armed = next
		w.timer.Reset(time.Until(next))
	}
}

// promoteChunk bounds the young holds promoted under one hold of w.mu, so
// that a client that took 50 000 locks since the watchdog last looked
// does not stall its own Lock and Unlock calls for tens of milliseconds
// while they move: BenchmarkWatchdogPromote measured 33-47 ms for 50 000
// at once since promotion makes each hold's entry (21-25 ms while a Lease
// carried it), and 1.9-2.4 ms for the longest chunk of 256, the one that
// grows a heap or meets the collector (chunks of 128: the same; 1.6-2.2
// ms with chunks of 1 024 before).
const promoteChunk = 256

// promote moves the young holds into entries and the heaps, promoteChunk
// at a time, letting other callers take w.mu between chunks; w.mu is held
// when it is called and when it returns (w.closed may have been set
// meanwhile).
func (w *Watchdog) promote() {
	for !w.promoteSome(promoteChunk) {
		w.mu.Unlock()
		w.mu.Lock()
	}
}

// promoteSome moves up to n young holds, the oldest first, into entries
// and the heaps, and reports whether none is left; w.mu is held.
func (w *Watchdog) promoteSome(n int) bool {
	for y := w.young.head; y != nil && n > 0; y, n = w.young.head, n-1 {
		hd, first := y.hd, y.first
		w.young.unlink(y)
		k, r, start := hd.Promoted()
		r.First = first
		w.keep(newHeld(k, r, hd, start))
	}
	if w.young.head != nil {
		return false
	}
	w.youngNext = time.Time{}
	return true
}

// keep indexes h, new or young, in entries and both heaps; w.mu is held.
func (w *Watchdog) keep(h *Held) {
	w.entries[h.k] = h
	w.setExpiry(h, h.exp.at)
	heap.Push(&w.queue, h)
}

// empty reports whether nothing is held; w.mu is held.
func (w *Watchdog) empty() bool { return len(w.entries) == 0 && w.young.head == nil }

// remove unregisters a Holder of k; the hold goes when its last Holder
// does.
func (w *Watchdog) Remove(k Key, hd Holder) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if yh, ok := hd.(YoungHolder); ok {
		if y := yh.YoungNode(); y.hd != nil { // young: its only Holder is hd
			w.young.unlink(y)
			if w.empty() {
				w.idle = time.Time{}
			}
			return
		}
	}
	h := w.entries[k]
	if h == nil {
		return
	}
	h.holders = slices.DeleteFunc(h.holders, func(x Holder) bool { return x == hd })
	if len(h.holders) == 0 {
		w.forget(h)
	}
}

// forget drops h; w.mu is held.
func (w *Watchdog) forget(h *Held) {
	if h.exp.index >= 0 {
		heap.Remove(&w.expiries, h.exp.index)
	}
	delete(w.entries, h.k)
	if h.index >= 0 {
		heap.Remove(&w.queue, h.index)
	}
	if w.empty() {
		w.idle = time.Time{} // run stamps it: a release reads no clock
	}
}

// lose cancels every Holder of h with cause and forgets h, unless h is no
// longer registered (released or already lost).
func (w *Watchdog) lose(h *Held, cause error) {
	w.mu.Lock()
	if w.entries[h.k] != h {
		w.mu.Unlock()
		return
	}
	w.forget(h)
	holders := h.holders
	w.mu.Unlock()
	if w.OnLost != nil && cause != impl.ErrClosed {
		w.OnLost(h.Renew.Object, cause)
	}
	for _, hd := range holders {
		hd.Cancel(cause)
	}
}

func (w *Watchdog) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.done)
	w.promoteSome(math.MaxInt) // all at once: nothing else runs any more
	all := w.entries
	w.entries = map[Key]*Held{}
	w.queue = nil
	w.expiries = nil
	if w.expTimer != nil {
		w.expTimer.Stop()
	}
	w.mu.Unlock()
	w.wg.Wait()
	for _, h := range all {
		for _, hd := range h.holders {
			hd.Cancel(impl.ErrClosed)
		}
	}
}

// Linger is how long run stays when nothing is held before it
// returns: a client that takes and releases locks one after the other
// (a Lock's release leaves the watchdog before the next Lock joins it)
// keeps one sleeping goroutine instead of starting one per Lock, which
// cost a goroutine, a timer and the wake-up of another thread each time
// (TestWatchdogLingers).
const Linger = time.Second

// run renews the holds as they come due; it returns when it wakes and
// nothing has been held since it found nothing held, Linger
// before (add starts it again), or the watchdog is closed. A release
// neither moves its timer nor reads the clock (that would cost every last
// Unlock a timer change or a clock reading): a goroutine asleep until a
// released hold's Renewal wakes then, finds nothing held and lingers,
// returning at least Linger after the last release.
func (w *Watchdog) run() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		var earliest time.Time
		if w.empty() { // the linger starts when run sees nothing held
			if w.idle.IsZero() {
				w.idle = time.Now()
			}
			earliest = w.idle.Add(Linger)
		} else {
			if len(w.queue) > 0 {
				earliest = w.queue[0].next
			}
			if y := w.youngNext; !y.IsZero() && (earliest.IsZero() || y.Before(earliest)) {
				earliest = y
			}
		}
		if w.closed || (w.empty() && !time.Now().Before(earliest)) {
			w.running = false
			w.armed = time.Time{}
			w.timer = nil
			w.mu.Unlock()
			return
		}
		w.armed = earliest
		wait := time.Hour
		if !earliest.IsZero() {
			wait = time.Until(earliest)
		}
		timer.Reset(wait) // under w.mu: add moves it when it must fire sooner
		w.timer = timer
		w.mu.Unlock()
		select {
		case <-w.done:
			return
		case <-timer.C:
		}
		w.mu.Lock()
		w.timer = nil // awake: the renewals below and the next sleep see every add
		w.mu.Unlock()
		// Renew what is due, one bounded pipeline at a time; while the
		// next ones are not late yet, pause as long as the last one took
		// between them, spreading a large round over the early window.
		for {
			took, more, late := w.renewDue()
			if !more {
				break
			}
			if late {
				continue
			}
			timer.Reset(took)
			select {
			case <-w.done:
				return
			case <-timer.C:
			}
		}
	}
}

// renewDue renews, in one pipeline of at most MaxPipeline commands, the
// holds due now or within a quarter of their interval (renewing a little
// early batches better than renewing exactly on time), most urgent first.
// It returns how long that took, whether more are due, and whether the
// most urgent of them is late.
func (w *Watchdog) renewDue() (took time.Duration, more, late bool) {
	now := time.Now()
	var batch []*Held
	timeout := time.Duration(0)
	// Early by a quarter of the hold's own interval: a hand-off's first
	// Renewal is due within a third of its short lease (Renewal.First),
	// and the quarter of its spec's interval (2.5 s of a 30 s lease) would
	// renew it whenever run wakes, however young.
	due := func(h *Held) bool {
		every, _ := interval(h.Renew, h.first)
		return h.next.Sub(now) <= every/4
	}
	w.mu.Lock()
	w.promote()
	for len(w.queue) > 0 && len(batch) < MaxPipeline && due(w.queue[0]) {
		h := heap.Pop(&w.queue).(*Held)
		if h.Renew.Args == nil && h.Renew.ArgsOf != nil {
			h.Renew.Args = h.Renew.ArgsOf.RenewArgs()
		}
		batch = append(batch, h)
		if iv, _ := interval(h.Renew, h.first); timeout == 0 || iv < timeout {
			timeout = iv
		}
	}
	w.mu.Unlock()
	if len(batch) == 0 {
		return 0, false, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	w.renew(ctx, batch, now)
	cancel()
	took = time.Since(now)
	var gone []*Held
	w.mu.Lock()
	for _, h := range batch {
		if w.entries[h.k] != h {
			continue // released meanwhile
		}
		iv, _ := interval(h.Renew, h.first)
		switch h.Outcome {
		case Renewed:
			h.first = 0 // extended to its lease
			iv = RenewEvery(h.Renew.Lease)
			until := now.Add(h.Renew.ValidFor())
			if !extendAll(h, until) {
				// The reply came after the hold's local deadline (a
				// pause): its holders were told it is lost; stop
				// renewing it.
				h.Outcome = Lost
				gone = append(gone, h)
				continue
			}
			h.next = now.Add(iv)
			w.setExpiry(h, until)
		case Again:
			// Redis unreachable or failing: retry a fraction of the
			// interval later; the expiry timer ends the hold if this
			// lasts.
			h.next = time.Now().Add(iv / 4)
		default:
			gone = append(gone, h)
			continue
		}
		heap.Push(&w.queue, h)
	}
	now = time.Now()
	more = len(w.queue) > 0 && due(w.queue[0])
	late = more && !w.queue[0].next.After(now)
	w.mu.Unlock()
	for _, h := range gone {
		cause := impl.ErrLockLost
		if h.Outcome == Closed {
			cause = impl.ErrClosed
		}
		w.lose(h, cause)
	}
	return took, more, late
}

// Counts returns how many holds the watchdog keeps young, in entries, and
// in each heap (for tests).
func (w *Watchdog) Counts() (young, entries, queue, expiries int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for y := w.young.head; y != nil; y = y.next {
		young++
	}
	return young, len(w.entries), len(w.queue), len(w.expiries)
}

// Starts returns how many times the watchdog started its goroutine, and
// whether it is running (for tests).
func (w *Watchdog) Starts() (starts int, running bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.starts, w.running
}
