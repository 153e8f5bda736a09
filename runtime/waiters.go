package runtime

import (
	"strings"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// The waiters of one client on one channel, and who a message wakes. The
// connection layer under it is hub.go; h.mu guards everything here.
//
// A message whose payload names an owner ("<clientID>:<n>", then maybe
// more words) is for the waiter of that owner alone: a kind with a waiter
// registry in Redis (see "Waiter registry" in docs/design.md) tells each
// woken waiter by name, on its client's channel. Such a message that
// comes before its waiter joined (the waiter's attempt registered it, and
// the release was quicker than the attempt's reply) is kept for it. A
// message whose payload is "all" wakes every waiter (an operator's change,
// a reconnect). Any other message wakes one waiter of the client (the
// longest waiting one that has no signal pending): a waiter joins the
// channel's queue before it tries to acquire, so a release published
// after the attempt always wakes it, and one that leaves without the lock
// passes such a signal on.

// RegistryTTL is how long a waiter's entry in an object's waiter registry
// (see "Waiter registry" in docs/design.md) stays without a refresh: a
// live waiter refreshes it every RegistryTTL/3, so one that died is
// passed over at most this long after its last refresh.
const RegistryTTL = time.Second

// HandoffLease is the lease a lock (or a semaphore's permits) handed to a
// waiter by a release gets until its new holder renews it or extends it
// to the spec's lease: RegistryTTL, so that a hand-off to a waiter that
// died (within its entry's last RegistryTTL) blocks the lock for at most
// this long, and the next waiter's refresh, due within RegistryTTL/3,
// finds it free.
//
// The woken waiter's hold counts as held for HandoffLease (or its lease,
// when shorter) from the send of its last attempt: the release ran after
// that attempt's script, so Redis keeps the hand-off at least that long.
// A waiter does not take the message at its word, but confirms it with
// its next attempt (which extends a hold still its own to the spec's
// lease, and otherwise queues it again), when less than a third of that
// is left (a GC pause, a loaded machine, a stopped process), or when two
// of its attempts were so far apart that a hand-off between them may have
// run out unseen (the message is then stale: see handoffTrust). So a
// waiter late past its hand-off never believes it holds the lock.
const HandoffLease = RegistryTTL

// handoffTrust decides whether a waiter takes a hand-off message at its
// word. A hand-off to the waiter vanishes unseen (its lease runs out in
// Redis) only if no attempt of the waiter ran for HandoffLease after the
// release: an attempt finds the lock handed to it and takes it. So a
// message is stale only if an attempt returned at least HandoffLease
// after the send of the attempt before it; from such a gap on, every
// message of the wait is confirmed by an attempt (late), and before it a
// message is trusted while it leaves a third of the hold's first validity
// (fresh).
type handoffTrust struct {
	sent time.Time // the send of the last attempt
	late bool      // two attempts were far enough apart to hide a hand-off
}

// sending notes an attempt sent now; pass its result to replied.
func (h *handoffTrust) sending() (prev time.Time) {
	prev, h.sent = h.sent, time.Now()
	return prev
}

// replied notes the reply of the attempt whose sending returned prev. A
// gap of two thirds of HandoffLease counts (the clocks' rates differ a
// little; a waiter refreshes every RegistryTTL/3 by default).
func (h *handoffTrust) replied(prev time.Time) {
	if !prev.IsZero() && time.Since(prev) >= HandoffLease-watchdog.RenewEvery(HandoffLease) {
		h.late = true
	}
}

// fresh reports whether a hand-off message that came now leaves the hold
// enough to take it without asking Redis: no gap made it suspect, and a
// third at least of the hold's first validity (the hand-off's lease, or
// lease when shorter) is left, the time the watchdog's schedule gives a
// renewal to land (the first renewal is due at once when the message
// came after a third of it).
func (h *handoffTrust) fresh(lease time.Duration) bool {
	v := min(HandoffLease, lease)
	return !h.late && time.Since(h.sent) < v-watchdog.RenewEvery(v)
}

// waiter is one goroutine waiting on a subscription, or a watch.
type waiter struct {
	owner  string        // the owner messages name it by; "" for none
	signal chan struct{} // capacity 1: a pending wake-up (maybe shared, see joinAs)
	notify func()        // a watch's: called instead of signalling
	msg    string        // the last message naming owner, until taken

	prev, next *waiter     // in its subscription's waiterList
	list       *waiterList // the list it is in; nil once it left
}

// waiterList is a subscription's waiters in arrival order, indexed by
// owner, so that joining, leaving and a message naming an owner cost the
// same however many waiters share the channel (a client's waits on every
// object of a namespace share one with classic pub/sub). h.mu guards it.
type waiterList struct {
	head, tail *waiter
	// byOwner holds each owner's longest-waiting waiter. An owner carried
	// in a context may wait on two objects of a namespace at once: twins
	// counts the waiters whose owner had one already, and only while it
	// is not 0 does a leave look for the next waiter of its owner.
	byOwner map[string]*waiter
	twins   int
}

// push appends w.
func (l *waiterList) push(w *waiter) {
	w.list, w.prev, w.next = l, l.tail, nil
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next = w
	}
	l.tail = w
	if w.owner == "" {
		return
	}
	if l.byOwner == nil {
		l.byOwner = map[string]*waiter{}
	}
	if _, ok := l.byOwner[w.owner]; ok {
		l.twins++
	} else {
		l.byOwner[w.owner] = w
	}
}

// remove takes w out, when it is in l.
func (l *waiterList) remove(w *waiter) {
	if w.list != l {
		return
	}
	if w.prev == nil {
		l.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		l.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	next := w.next
	w.list, w.prev, w.next = nil, nil, nil
	if w.owner == "" {
		return
	}
	if l.byOwner[w.owner] != w { // a twin leaves
		l.twins--
		return
	}
	delete(l.byOwner, w.owner)
	if l.twins == 0 {
		return
	}
	for x := next; x != nil; x = x.next { // its owner's next waiter, if any
		if x.owner == w.owner {
			l.byOwner[w.owner] = x
			l.twins--
			return
		}
	}
}

// ofOwner returns the longest-waiting waiter of owner, or nil.
func (l *waiterList) ofOwner(owner string) *waiter { return l.byOwner[owner] }

// each yields the waiters in arrival order; yield must not change l.
func (l *waiterList) each(yield func(*waiter) bool) {
	for w := l.head; w != nil; w = w.next {
		if !yield(w) {
			return
		}
	}
}

// WakeAll is the message payload that wakes every waiter of a channel.
const wakeAll = "all"

// deliver handles a message on s's channel. h.mu must be held.
func (h *hub) deliver(s *subscription, payload string) {
	if payload == wakeAll {
		h.broadcast(s)
		return
	}
	owner, _, _ := strings.Cut(payload, " ")
	if !strings.Contains(owner, ":") {
		h.wakeOne(s)
		return
	}
	if w := s.waiters.ofOwner(owner); w != nil {
		w.msg = payload
		w.wake()
		return
	}
	if len(s.unclaimed) >= maxUnclaimed {
		clear(s.unclaimed) // of waiters that left: their scripts handed on
	}
	if s.unclaimed == nil {
		s.unclaimed = map[string]string{}
	}
	s.unclaimed[owner] = payload
}

// maxUnclaimed bounds the messages a subscription keeps for owners not
// joined. A message lost this way costs its waiter one refresh interval.
const maxUnclaimed = 64

// joinAs queues a new waiter on s for owner: messages naming owner wake
// it alone, also one that came before it joined. It is woken on signal
// (capacity 1), which the waiters of one wait on several channels share.
func (h *hub) joinAs(s *subscription, owner string, signal chan struct{}) *waiter {
	w := &waiter{owner: owner, signal: signal}
	h.mu.Lock()
	if m, ok := s.unclaimed[owner]; ok && owner != "" {
		delete(s.unclaimed, owner)
		w.msg = m
		w.wake()
	}
	if h.closed { // closed since it subscribed: the wait sees it at once
		w.wake()
	}
	s.waiters.push(w)
	h.mu.Unlock()
	return w
}

// watch queues a waiter on s that calls notify (with the hub's lock held,
// so notify must not block nor call the hub) on every wake-up, instead of
// signalling a goroutine: the delay scheduler watches many channels from
// one goroutine. It leaves with leave.
func (h *hub) watch(s *subscription, notify func()) *waiter {
	w := &waiter{notify: notify}
	h.mu.Lock()
	s.waiters.push(w)
	h.mu.Unlock()
	return w
}

// message returns the message naming w's owner that woke it, if one did,
// and forgets it.
func (h *hub) message(w *waiter) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := w.msg
	w.msg = ""
	return m
}

// ready reports whether channel is subscribed and confirmed now.
func (h *hub) ready(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[channel]
	return s != nil && s.isReady
}

// leave removes w from s; a wake-up w received but did not use (it leaves
// without the lock) goes to the next waiter, unless it was a message
// naming w (the registry's scripts hand such a wake-up on in Redis).
func (h *hub) leave(s *subscription, w *waiter, used bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.waiters.remove(w)
	select {
	case <-w.signal:
		if !used && w.msg == "" {
			h.wakeOne(s)
		}
	default:
	}
}

// broadcast wakes every waiter of s. h.mu must be held.
func (h *hub) broadcast(s *subscription) {
	for w := range s.waiters.each {
		w.wake()
	}
}

// wakeOne wakes the first waiter of s without a pending wake-up. h.mu must
// be held.
func (h *hub) wakeOne(s *subscription) {
	for w := range s.waiters.each {
		if w.wake() {
			return
		}
	}
}

// wake gives w a wake-up unless it has one pending; it reports whether it
// did.
func (w *waiter) wake() bool {
	if w.notify != nil {
		w.notify()
		return true
	}
	select {
	case w.signal <- struct{}{}:
		return true
	default:
		return false
	}
}
