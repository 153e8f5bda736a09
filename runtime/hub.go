package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// hub multiplexes every wait of one client onto one pub/sub connection.
// Channels are reference-counted: the first waiter subscribes, the last
// one leaves. A waiter joins the channel's queue before it tries to
// acquire and then waits for its signal, so a release published after the
// attempt always wakes it. A message wakes one waiter of the client (the
// longest waiting one that has no signal pending), not all: only one can
// take the lock, and a woken waiter that leaves without it passes its
// signal on. A message whose payload is "all" wakes every waiter (for
// kinds where several can proceed, such as readers). go-redis resubscribes
// after a reconnect; the hub then wakes every waiter of the channel,
// because messages may have been lost while disconnected.
type hub struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	ps      *redis.PubSub
	subs    map[string]*subscription
	pending map[string]int // confirmations not yet received, per channel
	closed  bool
	done    chan struct{}
}

type subscription struct {
	channel string
	refs    int
	ready   chan struct{} // closed once SUBSCRIBE is confirmed
	isReady bool
	waiters []*waiter   // in arrival order
	linger  *time.Timer // drops the channel once it has been unused for linger
}

// waiter is one goroutine waiting on a subscription.
type waiter struct {
	signal chan struct{} // capacity 1: a pending wake-up
}

// WakeAll is the message payload that wakes every waiter of a channel.
const wakeAll = "all"

func newHub(rdb redis.UniversalClient) *hub {
	return &hub{rdb: rdb, subs: map[string]*subscription{}, pending: map[string]int{}, done: make(chan struct{})}
}

// subscribe adds a reference to channel and waits until the subscription
// is confirmed by the server. It returns ErrClosed after close, or ctx's
// error.
func (h *hub) subscribe(ctx context.Context, channel string) (*subscription, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	s := h.subs[channel]
	if s == nil {
		s = &subscription{channel: channel, ready: make(chan struct{})}
		h.subs[channel] = s
		if h.ps == nil {
			h.ps = h.rdb.Subscribe(context.WithoutCancel(ctx))
			go h.receive(h.ps.ChannelWithSubscriptions(redis.WithChannelSize(1000)))
		}
		h.pending[channel]++
		// Subscribe only writes the command; the confirmation arrives in
		// receive. A write error makes go-redis reconnect and resubscribe.
		_ = h.ps.Subscribe(context.WithoutCancel(ctx), channel)
	}
	s.refs++
	h.mu.Unlock()

	select {
	case <-s.ready:
		return s, nil
	case <-h.done:
		h.unsubscribe(s)
		return nil, ErrClosed
	case <-ctx.Done():
		h.unsubscribe(s)
		return nil, ctx.Err()
	}
}

// unsubscribe drops a reference taken by subscribe. A confirmed channel
// stays subscribed for linger after its last waiter leaves: under
// contention the next waiter comes soon, and finds it ready without a
// round trip.
func (h *hub) unsubscribe(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.refs--
	if s.refs > 0 || h.closed || h.subs[s.channel] != s {
		return
	}
	if !s.isReady {
		h.drop(s)
		return
	}
	if s.linger == nil {
		s.linger = time.AfterFunc(linger, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if s.refs == 0 && !h.closed && h.subs[s.channel] == s {
				h.drop(s)
			}
		})
	} else {
		s.linger.Reset(linger)
	}
}

// linger is how long a channel stays subscribed without waiters.
const linger = time.Second

// drop unsubscribes s's channel. h.mu must be held.
func (h *hub) drop(s *subscription) {
	delete(h.subs, s.channel)
	h.pending[s.channel]++
	_ = h.ps.Unsubscribe(context.Background(), s.channel)
}

// join queues a new waiter on s.
func (h *hub) join(s *subscription) *waiter {
	w := &waiter{signal: make(chan struct{}, 1)}
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

// closedCh is closed when the hub is closed.
func (h *hub) closedCh() <-chan struct{} { return h.done }

func (h *hub) receive(msgs <-chan any) {
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			h.mu.Lock()
			if s := h.subs[m.Channel]; s != nil {
				if m.Payload == wakeAll {
					h.broadcast(s)
				} else {
					h.wakeOne(s)
				}
			}
			h.mu.Unlock()
		case *redis.Subscription:
			h.confirmed(m)
		}
	}
}

// confirmed handles a subscribe or unsubscribe confirmation. Replies come
// in the order the commands were sent, so a channel is subscribed once
// every command sent for it has been confirmed. A subscribe confirmation
// that nothing was waiting for is go-redis resubscribing after a
// reconnect: wake the waiters, they may have missed a release.
func (h *hub) confirmed(m *redis.Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending[m.Channel] > 0 {
		h.pending[m.Channel]--
	} else if m.Kind == "subscribe" {
		if s := h.subs[m.Channel]; s != nil {
			h.broadcast(s)
		}
		return
	}
	if h.pending[m.Channel] > 0 {
		return
	}
	delete(h.pending, m.Channel)
	if s := h.subs[m.Channel]; s != nil && !s.isReady && m.Kind == "subscribe" {
		s.isReady = true
		close(s.ready)
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
	select {
	case w.signal <- struct{}{}:
		return true
	default:
		return false
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	if h.ps != nil {
		_ = h.ps.Close()
	}
}
