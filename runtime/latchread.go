package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// latchReads shares the reads of a latch's count among the waiters of one
// client (Latch.Await), so that a client's cost does not grow with its
// goroutines awaiting one latch. Each asks whether the latch is open
// before it subscribes, once subscribed, when the latch's last count-down
// wakes every waiter, and on its fallback timer. The first three need a
// read sent after they asked (else they could miss an opening): while one
// read is on its way, the callers that ask meanwhile share the next,
// which goes out when the first is back, so a burst of N costs two reads,
// not N. A fallback timer needs only a read sent after the waiter's own
// last one: the client keeps the last read of a latch while goroutines
// await it, and a timer that finds it newer takes its answer. One
// goroutine per latch sends the reads while any are asked for.
type latchReads struct {
	mu    sync.Mutex
	latch map[string]*latchQueue // by latch key, while awaited or read
}

// latchQueue is one latch's reads: the next, which the callers that came
// since the last was sent share, and the last answered.
type latchQueue struct {
	next    *latchRead // nil until a caller asks
	last    *latchRead // the last read answered without an error
	running bool       // run sends the reads
	waiters int        // goroutines awaiting the latch (join)
}

// latchRead is one read of a latch's count, and what it found.
type latchRead struct {
	sent time.Time     // when it was sent (set by run)
	done chan struct{} // closed once open and err are set
	open bool
	err  error
}

// queue returns key's queue, made when missing (rs.mu held).
func (rs *latchReads) queue(key string) *latchQueue {
	q := rs.latch[key]
	if q == nil {
		if rs.latch == nil {
			rs.latch = map[string]*latchQueue{}
		}
		q = &latchQueue{}
		rs.latch[key] = q
	}
	return q
}

// join counts a goroutine awaiting the latch of key, so that its last
// read is kept while it waits; leave ends it.
func (rs *latchReads) join(key string) (leave func()) {
	rs.mu.Lock()
	q := rs.queue(key)
	q.waiters++
	rs.mu.Unlock()
	return func() {
		rs.mu.Lock()
		q.waiters--
		if q.waiters == 0 && !q.running && rs.latch[key] == q {
			delete(rs.latch, key)
		}
		rs.mu.Unlock()
	}
}

// read reports whether the latch of key is open, by a read sent after
// after (the zero time: after the call), and when that read was sent. A
// read is sent with send, run with a context that keeps ctx's values,
// bounded by ReleaseTimeout (it serves other callers too). It returns
// ctx's error when ctx ends first.
func (rs *latchReads) read(ctx context.Context, key string, after time.Time, send func(context.Context) (bool, error)) (bool, time.Time, error) {
	rs.mu.Lock()
	q := rs.queue(key)
	if last := q.last; last != nil && !after.IsZero() && last.sent.After(after) {
		rs.mu.Unlock()
		return last.open, last.sent, nil
	}
	r := q.next
	if r == nil {
		r = &latchRead{done: make(chan struct{})}
		q.next = r
	}
	if !q.running {
		q.running = true
		go rs.run(context.WithoutCancel(ctx), key, q, send)
	}
	rs.mu.Unlock()
	select {
	case <-r.done:
		return r.open, r.sent, r.err
	case <-ctx.Done():
		return false, time.Time{}, ctx.Err()
	}
}

// run sends q's reads one after the other while callers ask for them:
// each time it takes the next read (later callers queue another), sends
// it and answers its callers; with none asked for, it ends (and drops q
// when nobody awaits the latch).
func (rs *latchReads) run(ctx context.Context, key string, q *latchQueue, send func(context.Context) (bool, error)) {
	for {
		rs.mu.Lock()
		r := q.next
		if r == nil {
			q.running = false
			if q.waiters == 0 && rs.latch[key] == q {
				delete(rs.latch, key)
			}
			rs.mu.Unlock()
			return
		}
		q.next = nil
		r.sent = time.Now()
		rs.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
		r.open, r.err = send(rctx)
		if r.err != nil && rctx.Err() != nil {
			// (Not a caller's deadline: theirs end their own waits.)
			r.err = fmt.Errorf("lockgen: reading %s: %w", key, readTimeout{})
		}
		cancel()
		if r.err == nil {
			rs.mu.Lock()
			q.last = r
			rs.mu.Unlock()
		}
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
