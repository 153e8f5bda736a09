package runtime

import "time"

// The waiters of one client on one channel, and who a message wakes. The
// connection layer under it is hub.go; h.mu guards everything here.
//
// A waiter joins the channel's queue before it tries to acquire and then
// waits for its signal, so a release published after the attempt always
// wakes it. A message wakes one waiter of the client (the longest waiting
// one that has no signal pending), not all: only one can take the lock,
// and a woken waiter that leaves without it passes its signal on. A
// message whose payload is "all" wakes every waiter (for kinds where
// several can proceed, such as readers).

// RegistryTTL is how long a waiter's entry in an object's waiter registry
// (see "Waiter registry" in the package doc) stays without a refresh: a
// live waiter refreshes it every RegistryTTL/3, so one that died is
// passed over at most this long after its last refresh.
const RegistryTTL = time.Second

// HandoffLease is the lease a lock handed to a waiter by a release gets
// until its new holder renews it (or, without a watchdog, extends it to
// the spec's lease on receipt): a hand-off to a waiter that died blocks
// the lock for at most this long.
const HandoffLease = time.Second

// waiter is one goroutine waiting on a subscription, or a watch.
type waiter struct {
	signal chan struct{} // capacity 1: a pending wake-up
	notify func()        // a watch's: called instead of signalling
}

// WakeAll is the message payload that wakes every waiter of a channel.
const wakeAll = "all"

// deliver handles a message on s's channel. h.mu must be held.
func (h *hub) deliver(s *subscription, payload string) {
	if payload == wakeAll {
		h.broadcast(s)
	} else {
		h.wakeOne(s)
	}
}

// join queues a new waiter on s.
func (h *hub) join(s *subscription) *waiter {
	w := &waiter{signal: make(chan struct{}, 1)}
	h.mu.Lock()
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

// leave removes w from s; a wake-up w received but did not use (it leaves
// without the lock) goes to the next waiter.
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
		if !used {
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
