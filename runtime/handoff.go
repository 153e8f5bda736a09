package runtime

import (
	"time"

	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// The waiter registry's timings, and when a woken waiter trusts a
// hand-off message (the waiters and who a message wakes are the hub's:
// runtime/internal/hub).

// RegistryTTL is how long a waiter's entry in an object's waiter registry
// (see "Waiter registry" in docs/design.md) stays without a refresh where
// a release cannot tell a waiter whose client went away (classic pub/sub
// on a cluster or a Ring; elsewhere LiveRegistryTTL), and for the waiters
// of a RedLock or an atomic multi-lock: a live waiter refreshes it every
// RegistryTTL/3, so one that died is passed over at most this long after
// its last refresh.
const RegistryTTL = impl.RegistryTTL

// HandoffLease is the lease a lock (or a semaphore's permits) handed to a
// waiter by a release gets until its new holder renews it or extends it
// to the spec's lease: one second, so that a hand-off to a waiter that
// stopped (a pause, SIGSTOP) with its connection open blocks the lock for
// at most this long (a waiter whose client went away is passed over at
// once, see LiveRegistryTTL); its client's next refresh of the others'
// registrations (refresher) finds it free. A simple, reentrant or fenced
// lock the watchdog does not renew is handed on with its spec's lease
// instead, which the message tells (where a release can tell a waiter
// whose client went away), so that its new holder need not extend it
// with one more script: a waiter stopped with its connection open then
// keeps it for that lease, as a stopped holder would.
//
// The woken waiter's hold counts as held for HandoffLease (or its lease,
// when shorter) from the server time the message carries, made local by
// the client's sample of that server's clock (clock.go), or, without a
// sample, from the send of its last attempt: the release ran after that
// attempt's script, so Redis keeps the hand-off at least that long.
// A waiter does not take the message at its word, but confirms it with
// its next attempt (which extends a hold still its own to the spec's
// lease, and otherwise queues it again), when less than a third of that
// is left (a GC pause, a loaded machine, a stopped process), or when two
// of its attempts were so far apart that a hand-off between them may have
// run out unseen (the message is then stale: see handoffTrust). So a
// waiter late past its hand-off never believes it holds the lock.
const HandoffLease = impl.HandoffLease

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

// start returns when a hand-off message that came now, saying the
// hand-off started at server time ms (0: it does not say), started at the
// earliest by this process's clock, and whether that leaves the hold
// enough to take it without asking Redis (fresh). With the server's clock
// known (Client.handedAt) the message says it itself, however long the
// wait; otherwise it is the send of the waiter's last attempt, and only
// a message that no gap made suspect counts.
func (h *handoffTrust) start(c *Client, key string, ms int64, lease time.Duration) (time.Time, bool) {
	return h.startFor(c, key, ms, min(HandoffLease, lease))
}

// startFor is start for a hold whose first validity is v: the hand-off's
// lease, or the hold's lease when shorter, or the whole lease when the
// message says the hand-off gave it (see Lock.handed).
func (h *handoffTrust) startFor(c *Client, key string, ms int64, v time.Duration) (time.Time, bool) {
	if ms > 0 {
		if at, ok := c.handedAt(key, ms); ok {
			return at, time.Since(at) < v-watchdog.RenewEvery(v)
		}
	}
	return h.sent, h.fresh(v)
}

// fresh reports whether a hand-off message that came now leaves the hold
// enough to take it without asking Redis: no gap made it suspect, and a
// third at least of the hold's first validity v is left, the time the
// watchdog's schedule gives a renewal to land (the first renewal is due
// at once when the message came after a third of it).
func (h *handoffTrust) fresh(v time.Duration) bool {
	return !h.late && time.Since(h.sent) < v-watchdog.RenewEvery(v)
}
