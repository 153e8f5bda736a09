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
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

type heldKey struct{ key, owner string }

// held is one (lock, owner) pair: the leases of nested re-entries share it.
type held struct {
	lock   *Lock
	owner  string
	leases map[*Lease]struct{}
	next   time.Time   // next renewal
	expiry *time.Timer // fires when the lease would have run out unrenewed
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

func (l *Lock) renewInterval() time.Duration { return l.def.Lease / 3 }

// add registers a lease taken at start; it returns ErrClosed when the
// client is closed.
func (w *watchdog) add(le *Lease, start time.Time) error {
	k := heldKey{le.lock.key, le.owner}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	h := w.entries[k]
	if h == nil {
		h = &held{lock: le.lock, owner: le.owner, leases: map[*Lease]struct{}{}}
		w.entries[k] = h
		h.expiry = time.AfterFunc(time.Until(start.Add(le.lock.def.Lease)), func() { w.lose(k, h, ErrLockLost) })
	} else {
		h.expiry.Reset(time.Until(start.Add(le.lock.def.Lease)))
	}
	h.leases[le] = struct{}{}
	next := start.Add(le.lock.renewInterval())
	if h.next.IsZero() || next.Before(h.next) {
		h.next = next
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// remove unregisters a lease; the entry goes when its last lease does.
func (w *watchdog) remove(le *Lease) {
	k := heldKey{le.lock.key, le.owner}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.entries[k]
	if h == nil {
		return
	}
	delete(h.leases, le)
	if len(h.leases) == 0 {
		h.expiry.Stop()
		delete(w.entries, k)
	}
}

// lose cancels every lease of entry h with cause and forgets it, unless h
// is no longer registered (released or already lost).
func (w *watchdog) lose(k heldKey, h *held, cause error) {
	w.mu.Lock()
	if w.entries[k] != h {
		w.mu.Unlock()
		return
	}
	delete(w.entries, k)
	h.expiry.Stop()
	leases := h.leases
	w.mu.Unlock()
	for le := range leases {
		le.cancel(cause)
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
		for le := range h.leases {
			le.cancel(ErrClosed)
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

// renewal is one entry's renewal in a batch.
type renewal struct {
	k   heldKey
	h   *held
	cmd *redis.Cmd
}

// renewDue renews, in one pipeline, every entry due now or within a
// quarter of its interval (renewing a little early batches better than
// renewing exactly on time).
func (w *watchdog) renewDue() {
	now := time.Now()
	var batch []renewal
	minInterval := time.Duration(0)
	w.mu.Lock()
	for k, h := range w.entries {
		iv := h.lock.renewInterval()
		if h.next.Sub(now) <= iv/4 {
			batch = append(batch, renewal{k: k, h: h})
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
	var again []renewal
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

func (w *watchdog) exec(ctx context.Context, batch []renewal, source bool) {
	pipe := w.c.rdb.Pipeline()
	for i := range batch {
		l := batch[i].h.lock
		args := []any{l.def.Lease.Milliseconds(), batch[i].h.owner}
		if source {
			batch[i].cmd = pipe.Eval(ctx, l.def.Scripts.Renew.Source, []string{l.key}, args...)
		} else {
			batch[i].cmd = pipe.EvalSha(ctx, l.def.Scripts.Renew.SHA1, []string{l.key}, args...)
		}
	}
	_, _ = pipe.Exec(ctx) // errors are per command
}

func (w *watchdog) renewed(k heldKey, h *held, sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.entries[k] != h {
		return
	}
	h.next = sent.Add(h.lock.renewInterval())
	h.expiry.Reset(time.Until(sent.Add(h.lock.def.Lease)))
}
