package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The delay timer.
//
// Items with a due time (a delayed queue's delayed items, a reliable
// queue's visibility deadlines) sit in sorted sets scored by their due
// time on the Redis server's clock. Each client runs one timer per queue
// instance it serves (it took from or offered to it, or called Start): a
// goroutine asleep until the earliest due time it knows of. It then runs
// the move script, which atomically moves what is due to the ready list,
// a batch at a time, and replies with the next due time; several clients'
// timers racing move each item once. A timer learns of earlier items from
// the queue's channel: a script that adds an item due before every live
// timer would fire (the queue's armed key) publishes on it. Nothing polls:
// a timer whose queue has nothing due sleeps until a message comes.
//
// A timer runs the move when it starts, so items that came due while no
// client ran (a crash, a restart of every client) are delivered then.

// moveBatch is how many items one run of the move script moves at most of
// each kind; a full batch makes the timer run it again at once.
const moveBatch = 100

// moveTimeout bounds one run of the move script.
const moveTimeout = 5 * time.Second

// maxRetry bounds the wait between retries of a move that failed.
const maxRetry = 5 * time.Second

// timerSet holds a client's delay timers, one per queue key it serves.
// The zero value is ready to use.
type timerSet struct {
	mu sync.Mutex
	m  map[string]*delayTimer
}

// delayTimer is one client's timer of one queue instance.
type delayTimer struct {
	c     *Client
	q     *queue
	ready chan struct{} // closed once the first move ran
	err   error         // the first move's error, set before ready is closed
}

// serveQueue returns the client's timer of q, starting it if need be.
func (c *Client) serveQueue(q *queue) *delayTimer {
	c.timers.mu.Lock()
	defer c.timers.mu.Unlock()
	if t := c.timers.m[q.key]; t != nil {
		return t
	}
	if c.timers.m == nil {
		c.timers.m = map[string]*delayTimer{}
	}
	t := &delayTimer{c: c, q: q, ready: make(chan struct{})}
	c.timers.m[q.key] = t
	go t.run()
	return t
}

// run is the timer's goroutine: it ends when the client is closed.
func (t *delayTimer) run() {
	h := t.c.hub
	sub, err := h.subscribe(context.Background(), t.q.ch)
	if err != nil { // the client was closed
		t.err = err
		close(t.ready)
		return
	}
	defer h.unsubscribe(sub)
	w := h.join(sub)
	defer h.leave(sub, w, true)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	first := true
	retry := time.Duration(0)
	for {
		// Subscribed before moving: an earlier item announced after the
		// move replied wakes us.
		next, err := t.move()
		if first {
			t.err = err
			close(t.ready)
			first = false
		}
		if err != nil {
			retry = min(max(2*retry, 50*time.Millisecond), maxRetry)
			next = retry
		} else {
			retry = 0
		}
		if next >= 0 {
			timer.Reset(next)
		}
		select {
		case <-w.signal:
		case <-timer.C:
		case <-h.closedCh():
			return
		}
		timer.Stop()
	}
}

// move runs the move script until no batch is full, and returns how long
// until the next due time, or -1 when nothing is due.
func (t *delayTimer) move() (time.Duration, error) {
	q := t.q
	for {
		ctx, cancel := context.WithTimeout(context.Background(), moveTimeout)
		res, err := t.c.eval(ctx, q.def.Scripts.Move, q.keys, q.ch, q.mode(), moveBatch,
			q.def.Visibility.Milliseconds(), q.def.MaxDeliveries).Int64Slice()
		cancel()
		if err != nil {
			return 0, fmt.Errorf("lockgen: delay timer of %s: %w", q.key, err)
		}
		if len(res) != 4 {
			return 0, fmt.Errorf("lockgen: delay timer of %s: unexpected reply %v", q.key, res)
		}
		now, next, full := res[0], res[1], res[3]
		if full == 1 {
			continue
		}
		if next < 0 {
			return -1, nil
		}
		return time.Duration(max(next-now, 0)) * time.Millisecond, nil
	}
}
