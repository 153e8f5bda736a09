package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// hub multiplexes every wait of one client onto one pub/sub connection.
// Channels are reference-counted: the first waiter subscribes, the last
// one leaves. This file is the connection layer: subscribing, confirming,
// lingering, reconnecting. Who is woken by a message is waiters.go's
// business (deliver); after a reconnect go-redis resubscribes and the hub
// wakes every waiter of the channel (broadcast), because messages may have
// been lost while disconnected.
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

// closedCh is closed when the hub is closed.
func (h *hub) closedCh() <-chan struct{} { return h.done }

func (h *hub) receive(msgs <-chan any) {
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			h.mu.Lock()
			if s := h.subs[m.Channel]; s != nil {
				h.deliver(s, m.Payload)
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

// publishCmd is the command that scripts publish wake-ups with, passed to
// them as an argument: "publish" (classic pub/sub) or "spublish" (sharded
// pub/sub, Redis Cluster >= 7.0). The choice is made once per client (see
// the hub); every script that publishes takes it from here.
func (c *Client) publishCmd() string { return "publish" }
