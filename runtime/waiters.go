package runtime

import (
	"strings"
	"time"
)

// The waiters of one client on one channel, and who a message wakes. The
// connection layer under it is hub.go; h.mu guards everything here.
//
// A message whose payload names an owner ("<clientID>:<n>", then maybe
// more words) is for the waiter of that owner alone: a kind with a waiter
// registry in Redis (see "Waiter registry" in the package doc) tells each
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
// (see "Waiter registry" in the package doc) stays without a refresh: a
// live waiter refreshes it every RegistryTTL/3, so one that died is
// passed over at most this long after its last refresh.
const RegistryTTL = time.Second

// HandoffLease is the lease a lock handed to a waiter by a release gets
// until its new holder renews it (or, without a watchdog, extends it to
// the spec's lease on receipt): a hand-off to a waiter that died blocks
// the lock for at most this long.
const HandoffLease = 3 * time.Second

// waiter is one goroutine waiting on a subscription, or a watch.
type waiter struct {
	owner  string        // the owner messages name it by; "" for none
	signal chan struct{} // capacity 1: a pending wake-up
	notify func()        // a watch's: called instead of signalling
	msg    string        // the last message naming owner, until taken
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
	for _, w := range s.waiters {
		if w.owner == owner {
			w.msg = payload
			w.wake()
			return
		}
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

// join queues a new waiter on s that no message names.
func (h *hub) join(s *subscription) *waiter { return h.joinAs(s, "") }

// joinAs queues a new waiter on s for owner: messages naming owner wake
// it alone, also one that came before it joined.
func (h *hub) joinAs(s *subscription, owner string) *waiter {
	w := &waiter{owner: owner, signal: make(chan struct{}, 1)}
	h.mu.Lock()
	if m, ok := s.unclaimed[owner]; ok && owner != "" {
		delete(s.unclaimed, owner)
		w.msg = m
		w.wake()
	}
	s.waiters = append(s.waiters, w)
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
	s.waiters = append(s.waiters, w)
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
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			break
		}
	}
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
	for _, w := range s.waiters {
		w.wake()
	}
}

// wakeOne wakes the first waiter of s without a pending wake-up. h.mu must
// be held.
func (h *hub) wakeOne(s *subscription) {
	for _, w := range s.waiters {
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
