package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// watchdog renews every renewable lock its client holds: one goroutine per
// client, woken at the earliest renewal due, renewing every lock due then
// (or soon after) in one pipeline. Each held lock also has a local expiry
// timer, reset on every successful renewal: if Redis cannot be reached
// until the lease would have run out, the holders learn it then, before
// anyone else can take the lock.
type watchdog struct {
	c *Client

	mu      sync.Mutex
	entries map[heldKey]*held
	closed  bool
	armed   time.Time // when run's timer fires; zero while idle
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

// heldKey identifies one hold in Redis: a key and the owner holding it
// (for a permit or a read lease, whatever the script names it by).
type heldKey struct{ key, owner string }

// renewal says how to renew one hold: Script is run with Keys and Args in
// the watchdog's pipeline and must return 1 when the hold was extended by
// Lease, 0 when it is gone. Interval is how often it is renewed.
type renewal struct {
	Script   *Script
	Keys     []string
	Args     []any
	Lease    time.Duration
	Interval time.Duration
}

// holder is what learns that a hold ended: a *Lease, a permit, ...
type holder interface {
	// cancel ends the holder's context with cause.
	cancel(cause error)
	// extend moves the holder's local deadline to until after a renewal
	// or re-entry; false: its deadline had passed already.
	extend(until time.Time) bool
}

// held is one hold and its holders: the leases of nested re-entries of
// one owner share it.
type held struct {
	renew   renewal
	holders map[holder]struct{}
	next    time.Time   // next renewal
	expiry  *time.Timer // fires when the lease would have run out unrenewed
}

func newWatchdog(c *Client) *watchdog {
	w := &watchdog{
		c:       c,
		entries: map[heldKey]*held{},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go w.run()
	return w
}

// add registers holder of the hold k, taken (or re-entered) at start; it
// returns ErrClosed when the client is closed. A hold's first holder sets
// how it is renewed.
func (w *watchdog) add(k heldKey, r renewal, hd holder, start time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	h := w.entries[k]
	if h == nil {
		h = &held{renew: r, holders: map[holder]struct{}{}}
		w.entries[k] = h
		h.expiry = time.AfterFunc(time.Until(start.Add(r.Lease)), func() { w.lose(k, h, ErrLockLost) })
	} else {
		h.expiry.Reset(time.Until(start.Add(r.Lease)))
		for hd := range h.holders {
			hd.extend(start.Add(r.Lease))
		}
	}
	h.holders[hd] = struct{}{}
	next := start.Add(r.Interval)
	if h.next.IsZero() || next.Before(h.next) {
		h.next = next
	}
	// Wake run only when its timer would fire too late: a Lock must not
	// cost a goroutine switch.
	if w.armed.IsZero() || h.next.Before(w.armed) {
		w.armed = h.next
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// remove unregisters a holder of k; the hold goes when its last holder
// does.
func (w *watchdog) remove(k heldKey, hd holder) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.entries[k]
	if h == nil {
		return
	}
	delete(h.holders, hd)
	if len(h.holders) == 0 {
		h.expiry.Stop()
		delete(w.entries, k)
	}
}

// lose cancels every holder of h with cause and forgets h, unless h is no
// longer registered (released or already lost).
func (w *watchdog) lose(k heldKey, h *held, cause error) {
	w.mu.Lock()
	if w.entries[k] != h {
		w.mu.Unlock()
		return
	}
	delete(w.entries, k)
	h.expiry.Stop()
	holders := h.holders
	w.mu.Unlock()
	for hd := range holders {
		hd.cancel(cause)
	}
}

func (w *watchdog) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.done)
	all := w.entries
	w.entries = map[heldKey]*held{}
	w.mu.Unlock()
	<-w.stopped
	for _, h := range all {
		h.expiry.Stop()
		for hd := range h.holders {
			hd.cancel(ErrClosed)
		}
	}
}

func (w *watchdog) run() {
	defer close(w.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		var earliest time.Time
		for _, h := range w.entries {
			if earliest.IsZero() || h.next.Before(earliest) {
				earliest = h.next
			}
		}
		w.armed = earliest
		w.mu.Unlock()
		wait := time.Hour
		if !earliest.IsZero() {
			wait = time.Until(earliest)
		}
		timer.Reset(wait)
		select {
		case <-w.done:
			return
		case <-w.wake:
			timer.Stop()
			continue
		case <-timer.C:
		}
		w.renewDue()
	}
}

// pending is one hold's renewal in a batch.
type pending struct {
	k   heldKey
	h   *held
	cmd *redis.Cmd
}

// renewDue renews, in one pipeline, every entry due now or within a
// quarter of its interval (renewing a little early batches better than
// renewing exactly on time).
func (w *watchdog) renewDue() {
	now := time.Now()
	var batch []pending
	minInterval := time.Duration(0)
	w.mu.Lock()
	for k, h := range w.entries {
		iv := h.renew.Interval
		if h.next.Sub(now) <= iv/4 {
			batch = append(batch, pending{k: k, h: h})
			// Until this round answers, retry no sooner than a
			// fraction of the interval.
			h.next = now.Add(iv / 4)
			if minInterval == 0 || iv < minInterval {
				minInterval = iv
			}
		}
	}
	w.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), minInterval)
	defer cancel()
	w.exec(ctx, batch, false)
	var again []pending
	for _, r := range batch {
		if isNoScript(r.cmd.Err()) {
			again = append(again, r)
		}
	}
	if len(again) > 0 {
		w.exec(ctx, again, true)
	}
	for _, r := range batch {
		n, err := r.cmd.Int()
		switch {
		case err != nil:
			// Redis unreachable or failing: keep the entry, retry at
			// h.next; the expiry timer cancels it if this lasts.
		case n == 1:
			w.renewed(r.k, r.h, now)
		default:
			w.lose(r.k, r.h, ErrLockLost)
		}
	}
}

func (w *watchdog) exec(ctx context.Context, batch []pending, source bool) {
	pipe := w.c.rdb.Pipeline()
	for i := range batch {
		r := batch[i].h.renew
		if source {
			batch[i].cmd = pipe.Eval(ctx, r.Script.Source, r.Keys, r.Args...)
		} else {
			batch[i].cmd = pipe.EvalSha(ctx, r.Script.SHA1, r.Keys, r.Args...)
		}
	}
	_, _ = pipe.Exec(ctx) // errors are per command
}

func (w *watchdog) renewed(k heldKey, h *held, sent time.Time) {
	w.mu.Lock()
	if w.entries[k] != h {
		w.mu.Unlock()
		return
	}
	for hd := range h.holders {
		if !hd.extend(sent.Add(h.renew.Lease)) {
			// The reply came after the hold's local deadline (a pause):
			// its holders were told it is lost; stop renewing it.
			w.mu.Unlock()
			w.lose(k, h, ErrLockLost)
			return
		}
	}
	h.next = sent.Add(h.renew.Interval)
	h.expiry.Reset(time.Until(sent.Add(h.renew.Lease)))
	w.mu.Unlock()
}
