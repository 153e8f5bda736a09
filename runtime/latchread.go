package runtime

import (
	"context"
	"fmt"
	"sync"
)

// latchReads shares the reads of a latch's count among the waiters of one
// client (Latch.Await), so that a client's cost does not grow with its
// goroutines awaiting one latch: each asks whether the latch is open
// before it subscribes, once subscribed, when the latch's last count-down
// wakes every waiter, and on its fallback timer. A read answers every
// caller that asked before it was sent, and only those: a caller needs a
// read sent after it asked (after its subscription was confirmed, or its
// wake-up came), else it could miss an opening. So while one read is on
// its way, the callers that come meanwhile wait for the next one, which
// goes out when the first is back: a burst of N callers costs two reads,
// not N. One goroutine per latch sends them while any are asked for.
type latchReads struct {
	mu    sync.Mutex
	latch map[string]*latchQueue // by latch key, while a read is asked for or on its way
}

// latchQueue is one latch's reads: the one on its way (sent by run) and
// the next, which the callers that came since it was sent share.
type latchQueue struct {
	next *latchRead // nil until a caller asks
}

// latchRead is one read of a latch's count, and what it found.
type latchRead struct {
	done chan struct{} // closed once open and err are set
	open bool
	err  error
}

// read reports whether the latch of key is open by a read sent after the
// call, with send (run with a context that keeps ctx's values, bounded by
// ReleaseTimeout: it serves other callers too). It returns ctx's error
// when ctx ends first.
func (rs *latchReads) read(ctx context.Context, key string, send func(context.Context) (bool, error)) (bool, error) {
	rs.mu.Lock()
	q := rs.latch[key]
	if q == nil {
		if rs.latch == nil {
			rs.latch = map[string]*latchQueue{}
		}
		q = &latchQueue{}
		rs.latch[key] = q
		go rs.run(context.WithoutCancel(ctx), key, q, send)
	}
	r := q.next
	if r == nil {
		r = &latchRead{done: make(chan struct{})}
		q.next = r
	}
	rs.mu.Unlock()
	select {
	case <-r.done:
		return r.open, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// run sends q's reads one after the other while callers ask for them:
// each time it takes the next read (later callers queue another), sends
// it and answers its callers; with none asked for, it drops q and ends.
func (rs *latchReads) run(ctx context.Context, key string, q *latchQueue, send func(context.Context) (bool, error)) {
	for {
		rs.mu.Lock()
		r := q.next
		if r == nil {
			delete(rs.latch, key)
			rs.mu.Unlock()
			return
		}
		q.next = nil
		rs.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
		r.open, r.err = send(rctx)
		if r.err != nil && rctx.Err() != nil {
			// (Not a caller's deadline: theirs end their own waits.)
			r.err = fmt.Errorf("lockgen: reading %s: %w", key, readTimeout{})
		}
		cancel()
		close(r.done)
	}
}

// readTimeout is a shared read that Redis did not answer within
// ReleaseTimeout: a net.Error timeout, so transient, so that the waits it
// answered try again after their backoff rather than end.
type readTimeout struct{}

func (readTimeout) Error() string   { return "no answer within " + ReleaseTimeout.String() }
func (readTimeout) Timeout() bool   { return true }
func (readTimeout) Temporary() bool { return true }
