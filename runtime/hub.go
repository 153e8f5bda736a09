package runtime

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
)

// hub multiplexes every wait of one client onto its pub/sub connections.
// Channels are reference-counted: the first waiter subscribes, the last
// one leaves. This file is the connection layer: subscribing, confirming,
// lingering, reconnecting, following slots. Who is woken by a message is
// waiters.go's business (deliver).
//
// Classic or sharded pub/sub is chosen once per client (see sharded): on
// a single node, Sentinel, a Ring, or a cluster older than Redis 7.0 the
// hub has one connection (classic SUBSCRIBE); on a Redis 7+ cluster it has
// one connection per primary and subscribes each channel with SSUBSCRIBE
// on the primary that owns the channel's slot (a channel shares its key's
// hash tag).
//
// Each connection is one go-redis PubSub read by one goroutine of the hub
// (Receive, not Channel: Channel drops the server's unsubscribe notices)
// and written by another, in order. Each subscribe and unsubscribe names
// one channel, so the server answers each with one reply, in order: the
// hub counts the replies it expects per channel, and a channel is
// confirmed once every command sent for it has been answered and the last
// was a subscribe. When a connection fails (an outage, CLIENT KILL, a
// failover), its PubSub is thrown away: a new one subscribes every channel
// again, and the channel's waiters are woken once that is confirmed,
// because messages may have been lost meanwhile. On a cluster, a channel
// whose slot moved (the server pushes an unsolicited sunsubscribe, or
// answers MOVED) is routed again after reloading the slot map, and its
// waiters are woken too. Waiters never depend on a confirmation:
// subscribe waits for it at most confirmWait, and every waiter keeps its
// fallback timer.
type hub struct {
	rdb          redis.UniversalClient
	mode         atomic.Int32 // modeUnknown, modeClassic or modeSharded
	allowSharded bool         // sharded pub/sub may be chosen

	mu       sync.Mutex
	subs     map[string]*subscription
	conns    map[string]*psConn         // by shard address; "" in classic mode
	homeless map[*subscription]struct{} // subscriptions waiting for a route
	homeKick chan struct{}              // wakes the rehoming goroutine
	homing   bool                       // the rehoming goroutine runs
	closed   bool
	done     chan struct{}

	observe func(context.Context, Event) // the client's observers (nil: none); set before use
}

// shardedPubSub enables sharded pub/sub on Redis 7 clusters by default
// (WithClassicPubSub turns it off per client). Every script that publishes
// takes its command from publishCmd.
const shardedPubSub = true

const (
	modeUnknown int32 = iota
	modeClassic
	modeSharded
)

type subscription struct {
	channel string
	refs    int
	ready   chan struct{} // closed once the subscription is confirmed
	isReady bool
	conn    *psConn    // the connection it is subscribed on; nil while routed
	waiters waiterList // in arrival order
	// unclaimed holds messages naming an owner that has not joined yet
	// (waiters.go).
	unclaimed map[string]string
	linger    *time.Timer // drops the channel once it has been unused for linger
}

// psConn is one pub/sub connection: the whole client's in classic mode,
// one primary's in sharded mode. Its fields are guarded by hub.mu.
type psConn struct {
	h       *hub
	addr    string        // "" in classic mode
	node    *redis.Client // the primary, in sharded mode
	sharded bool

	ps      *redis.PubSub            // replaced when its connection fails
	chans   map[string]*subscription // subscribed (or being subscribed) here
	ops     []psOp                   // commands not written yet, in order
	sent    []psOp                   // commands whose reply is due, in order
	pending map[string]int           // len(sent) per channel
	kick    chan struct{}            // wakes the writer
	stopped bool
}

type psOp struct {
	channel string
	sub     bool // subscribe, or unsubscribe
}

// Timings of the connection layer.
const (
	// confirmWait bounds how long subscribe waits for the server's
	// confirmation; the caller's fallback timer covers the rest.
	confirmWait = time.Second
	// linger is how long a channel stays subscribed without waiters.
	linger = time.Second
	// healthEvery is how long a connection may be silent before the hub
	// pings it; a second silence of that length throws it away.
	healthEvery = 3 * time.Second
	// opTimeout bounds one write (and the dial it may need).
	opTimeout = 5 * time.Second
	// maxBackoff caps the pause between reconnection and rerouting
	// attempts while Redis is unreachable.
	maxBackoff = 500 * time.Millisecond
)

func newHub(rdb redis.UniversalClient, allowSharded bool) *hub {
	return &hub{
		rdb: rdb, allowSharded: allowSharded, subs: map[string]*subscription{}, conns: map[string]*psConn{},
		homeless: map[*subscription]struct{}{}, homeKick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// sharded reports whether this client uses sharded pub/sub: only a
// *redis.ClusterClient whose servers answer PUBSUB SHARDNUMSUB (Redis
// 7.0+) does. The answer is probed on first need and kept for the life of
// the client; a probe that fails to reach Redis is not kept, and the
// error is returned.
func (h *hub) sharded(ctx context.Context) (bool, error) {
	switch h.mode.Load() {
	case modeClassic:
		return false, nil
	case modeSharded:
		return true, nil
	}
	cc, ok := h.rdb.(*redis.ClusterClient)
	if !ok || !h.allowSharded {
		h.mode.Store(modeClassic)
		return false, nil
	}
	err := cc.Do(ctx, "PUBSUB", "SHARDNUMSUB").Err()
	var rerr redis.Error
	switch {
	case err == nil:
		h.mode.CompareAndSwap(modeUnknown, modeSharded)
	case errors.As(err, &rerr): // an older server: unknown subcommand
		h.mode.CompareAndSwap(modeUnknown, modeClassic)
	default:
		return false, err
	}
	return h.mode.Load() == modeSharded, nil
}

// publishCmd is the command that scripts publish wake-ups with, passed to
// them as an argument: "publish" (classic pub/sub) or "spublish" (sharded
// pub/sub, Redis Cluster >= 7.0). The choice is made once per client (see
// hub.sharded); every script that publishes takes it from here. While the
// choice cannot be probed (Redis unreachable) it says "publish".
func (c *Client) publishCmd() string {
	if c.hub.mode.Load() == modeUnknown {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = c.hub.sharded(ctx)
	}
	if c.hub.mode.Load() == modeSharded {
		return "spublish"
	}
	return "publish"
}

// wakePrefix returns the channel prefix of the wake-ups of key's waiters:
// a waiter on client id waits on wakePrefix(key) + ":" + id, and the
// scripts publish to the prefix they are given plus the woken member's
// client id. With sharded pub/sub it is the key's own channel, key:ch,
// in the key's slot as SPUBLISH from a script must be. With classic
// pub/sub it is the key's namespace's, <namespace>:wake, so that a client
// waits on one channel per namespace however many objects it waits on,
// and subscribes it once rather than once per object (see "Waiting" in
// docs/design.md).
func (c *Client) wakePrefix(key string) string {
	if c.publishCmd() == "spublish" {
		return keys.Sub(key, "ch")
	}
	return c.classicWake(key).name
}

// classicPrefix is a namespace's classic wake-up prefix, and it boxed.
type classicPrefix struct {
	name string
	arg  any
}

// classicWake is wakePrefix with classic pub/sub: the key's namespace (up
// to its first ':', which a namespace never contains) and ":wake", made
// once per namespace and client.
func (c *Client) classicWake(key string) *classicPrefix {
	ns, _, _ := strings.Cut(key, ":")
	c.wakesMu.RLock()
	w := c.wakes[ns]
	c.wakesMu.RUnlock()
	if w != nil {
		return w
	}
	w = &classicPrefix{name: classicWakeName(ns)}
	w.arg = w.name
	c.wakesMu.Lock()
	defer c.wakesMu.Unlock()
	if c.wakes == nil {
		c.wakes = map[string]*classicPrefix{}
	}
	if old := c.wakes[ns]; old != nil {
		return old
	}
	c.wakes[ns] = w
	return w
}

// classicWakeName returns namespace ns's classic wake-up prefix, <ns>:wake.
func classicWakeName(ns string) string { return ns + ":wake" }

// subscribe adds a reference to channel and waits until the subscription
// is confirmed by the server, or at most confirmWait: a subscription that
// is confirmed later wakes the waiters that joined it meanwhile. It
// returns ErrClosed after close, or ctx's error.
func (h *hub) subscribe(ctx context.Context, channel string) (*subscription, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	s := h.subs[channel]
	fresh := s == nil
	if fresh {
		s = &subscription{channel: channel, ready: make(chan struct{})}
		h.subs[channel] = s
	}
	s.refs++
	h.mu.Unlock()
	if fresh {
		h.route(ctx, s)
	}

	h.mu.Lock()
	ready := s.ready
	h.mu.Unlock()
	t := time.NewTimer(confirmWait)
	defer t.Stop()
	select {
	case <-ready:
		return s, nil
	case <-t.C:
		return s, nil
	case <-h.done:
		h.unsubscribe(s)
		return nil, ErrClosed
	case <-ctx.Done():
		h.unsubscribe(s)
		return nil, ctx.Err()
	}
}

// route finds the connection for s and subscribes it there, or leaves it
// to the rehoming goroutine when that needs Redis and Redis cannot be
// reached.
func (h *hub) route(ctx context.Context, s *subscription) {
	addr, node, err := h.owner(ctx, s.channel)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.subs[s.channel] != s || s.conn != nil {
		return
	}
	if err != nil {
		h.rehome(s)
		return
	}
	h.attach(s, addr, node)
}

// owner returns the address and client of the primary whose connection
// channel belongs on: "" and nil in classic mode.
func (h *hub) owner(ctx context.Context, channel string) (string, *redis.Client, error) {
	sharded, err := h.sharded(ctx)
	if err != nil || !sharded {
		return "", nil, err
	}
	node, err := h.rdb.(*redis.ClusterClient).MasterForKey(ctx, channel)
	if err != nil {
		return "", nil, err
	}
	return node.Options().Addr, node, nil
}

// attach subscribes s on the connection for addr, creating it if needed.
// h.mu must be held.
func (h *hub) attach(s *subscription, addr string, node *redis.Client) {
	pc := h.conns[addr]
	if pc == nil {
		pc = &psConn{h: h, addr: addr, node: node, sharded: node != nil,
			chans: map[string]*subscription{}, pending: map[string]int{}, kick: make(chan struct{}, 1)}
		pc.ps = pc.newPubSub()
		h.conns[addr] = pc
		go pc.read()
		go pc.write()
	}
	s.conn = pc
	pc.chans[s.channel] = s
	pc.send(s.channel, true)
}

// rehome queues s for the rehoming goroutine, which routes it again after
// a pause. h.mu must be held.
func (h *hub) rehome(s *subscription) {
	h.unready(s)
	h.homeless[s] = struct{}{}
	if !h.homing {
		h.homing = true
		go h.rehoming()
	}
	select {
	case h.homeKick <- struct{}{}:
	default:
	}
}

// unready marks s as not (or no longer) confirmed. h.mu must be held.
func (h *hub) unready(s *subscription) {
	if s.isReady {
		s.isReady = false
		s.ready = make(chan struct{})
	}
}

// rehoming routes the homeless subscriptions, retrying with a growing
// pause while that fails. On a cluster it asks go-redis to reload the slot
// map first, since a moved slot or a failed primary is why they are
// homeless.
func (h *hub) rehoming() {
	backoff := 50 * time.Millisecond
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-h.homeKick:
		case <-h.done:
			return
		}
		for {
			if cc, ok := h.rdb.(*redis.ClusterClient); ok {
				cc.ReloadState(context.Background())
			}
			t.Reset(backoff)
			select {
			case <-t.C:
			case <-h.done:
				return
			}
			h.mu.Lock()
			var todo []*subscription
			for s := range h.homeless {
				todo = append(todo, s)
			}
			h.mu.Unlock()
			failed := false
			for _, s := range todo {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				addr, node, err := h.owner(ctx, s.channel)
				cancel()
				h.mu.Lock()
				if _, ok := h.homeless[s]; ok && err == nil {
					delete(h.homeless, s)
					if !h.closed && h.subs[s.channel] == s && s.conn == nil {
						h.attach(s, addr, node)
					}
				}
				failed = failed || err != nil
				h.mu.Unlock()
			}
			if !failed {
				backoff = 50 * time.Millisecond
				break
			}
			backoff = min(2*backoff, maxBackoff)
		}
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

// drop unsubscribes s's channel. h.mu must be held.
func (h *hub) drop(s *subscription) {
	delete(h.subs, s.channel)
	delete(h.homeless, s)
	if pc := s.conn; pc != nil {
		s.conn = nil
		delete(pc.chans, s.channel)
		pc.send(s.channel, false)
	}
}

// closedCh is closed when the hub is closed.
func (h *hub) closedCh() <-chan struct{} { return h.done }

// isClosed reports whether the hub is closed.
func (h *hub) isClosed() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.done)
	// Wake every goroutine waiting: one that waits on several clients'
	// channels (waitOn) sees this one closed when it wakes.
	for _, s := range h.subs {
		for w := range s.waiters.each {
			if w.notify == nil {
				w.wake()
			}
		}
	}
	var pss []*redis.PubSub
	for _, pc := range h.conns {
		pc.stopped = true
		pss = append(pss, pc.ps)
	}
	h.mu.Unlock()
	for _, ps := range pss {
		_ = ps.Close()
	}
}

// newPubSub returns a PubSub on pc's server that is not connected yet.
func (pc *psConn) newPubSub() *redis.PubSub {
	if pc.node != nil {
		return pc.node.Subscribe(context.Background())
	}
	return pc.h.rdb.Subscribe(context.Background())
}

// send queues a subscribe or unsubscribe of channel. h.mu must be held.
func (pc *psConn) send(channel string, sub bool) {
	op := psOp{channel: channel, sub: sub}
	pc.ops = append(pc.ops, op)
	pc.sent = append(pc.sent, op)
	pc.pending[channel]++
	select {
	case pc.kick <- struct{}{}:
	default:
	}
}

// write is pc's writer: it writes the queued commands in order. A failed
// write closes the PubSub, and the reader replaces it.
func (pc *psConn) write() {
	h := pc.h
	for {
		select {
		case <-pc.kick:
		case <-h.done:
			return
		}
		h.mu.Lock()
		if pc.stopped {
			h.mu.Unlock()
			return
		}
		ops, ps := pc.ops, pc.ps
		pc.ops = nil
		h.mu.Unlock()
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			var err error
			switch {
			case op.sub && pc.sharded:
				err = ps.SSubscribe(ctx, op.channel)
			case op.sub:
				err = ps.Subscribe(ctx, op.channel)
			case pc.sharded:
				err = ps.SUnsubscribe(ctx, op.channel)
			default:
				err = ps.Unsubscribe(ctx, op.channel)
			}
			cancel()
			if err != nil {
				_ = ps.Close()
				break
			}
		}
	}
}

// read is pc's reader: it hands messages to the waiters, matches replies
// to the commands sent, pings a silent connection, and replaces a failed
// one.
func (pc *psConn) read() {
	h := pc.h
	h.mu.Lock()
	ps := pc.ps
	h.mu.Unlock()
	backoff := time.Duration(0)
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(context.Background(), healthEvery)
		var rerr redis.Error
		var nerr net.Error
		switch {
		case err == nil:
			backoff, pinged = 0, false
			h.mu.Lock()
			switch m := msg.(type) {
			case *redis.Message:
				if s := h.subs[m.Channel]; s != nil {
					h.deliver(s, m.Payload)
				}
			case *redis.Subscription:
				pc.reply(m.Channel, m.Kind == "subscribe" || m.Kind == "ssubscribe")
			}
			h.mu.Unlock()
			continue
		case errors.As(err, &rerr): // a command was refused (MOVED, CROSSSLOT, NOPERM...)
			backoff, pinged = 0, false
			h.mu.Lock()
			pc.refused()
			h.mu.Unlock()
			continue
		case errors.As(err, &nerr) && nerr.Timeout() && !pinged:
			pinged = true
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			err = ps.Ping(ctx)
			cancel()
			if err == nil {
				continue
			}
		}
		// The connection failed, or was closed by the writer or the hub.
		h.mu.Lock()
		stopped := pc.stopped
		var chans []string
		if h.observe != nil && backoff == 0 && !stopped {
			for c := range pc.chans {
				chans = append(chans, c)
			}
		}
		h.mu.Unlock()
		if stopped {
			return
		}
		if backoff == 0 { // the first failure since it last worked
			h.lost(pc.addr, chans, err)
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), maxBackoff)
		select {
		case <-time.After(backoff):
		case <-h.done:
			return
		}
		pinged = false
		if ps = pc.replace(ps); ps == nil {
			return
		}
	}
}

// lost reports a failed connection and the channels it subscribes
// again (outside h.mu).
func (h *hub) lost(addr string, chans []string, cause error) {
	if h.observe == nil {
		return
	}
	ctx := context.Background()
	h.observe(ctx, Event{Kind: EventPubSubLost, Key: addr, N: len(chans), Err: cause})
	for _, c := range chans {
		h.observe(ctx, Event{Kind: EventResubscribed, Key: c})
	}
}

// replace throws old away and starts a new PubSub on which every channel
// of pc is subscribed again. In sharded mode the channels are routed
// again instead (their primary may have failed over or their slot moved)
// and pc stops. It returns the new PubSub, or nil when pc stopped.
func (pc *psConn) replace(old *redis.PubSub) *redis.PubSub {
	h := pc.h
	defer old.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if pc.stopped {
		return nil
	}
	pc.ops, pc.sent, pc.pending = nil, nil, map[string]int{}
	if pc.sharded {
		pc.stopped = true
		delete(h.conns, pc.addr)
		select { // let the writer see it
		case pc.kick <- struct{}{}:
		default:
		}
		for c, s := range pc.chans {
			delete(pc.chans, c)
			s.conn = nil
			h.rehome(s)
		}
		return nil
	}
	pc.ps = pc.newPubSub()
	for _, s := range pc.chans {
		h.unready(s)
		pc.send(s.channel, true)
	}
	return pc.ps
}

// reply handles the server's subscribe or unsubscribe reply on channel.
// The expected replies come in the order the commands were sent; a
// channel is confirmed once every command sent for it was answered. An
// unsolicited unsubscribe is the server dropping a sharded channel whose
// slot moved away: it is routed again and its waiters woken, since
// messages may be lost meanwhile. h.mu must be held.
func (pc *psConn) reply(channel string, sub bool) {
	h := pc.h
	if len(pc.sent) == 0 || pc.sent[0] != (psOp{channel: channel, sub: sub}) {
		if s := pc.chans[channel]; s != nil && !sub {
			delete(pc.chans, channel)
			s.conn = nil
			h.broadcast(s)
			h.rehome(s)
		}
		return
	}
	pc.sent = pc.sent[1:]
	if pc.pending[channel]--; pc.pending[channel] > 0 {
		return
	}
	delete(pc.pending, channel)
	if s := pc.chans[channel]; s != nil && sub && !s.isReady {
		s.isReady = true
		close(s.ready)
		h.broadcast(s)
	}
}

// refused handles an error reply: the oldest command sent was refused. A
// refused subscribe is routed again (on a cluster: MOVED while the slot
// map was stale). h.mu must be held.
func (pc *psConn) refused() {
	if len(pc.sent) == 0 {
		return
	}
	op := pc.sent[0]
	pc.sent = pc.sent[1:]
	if pc.pending[op.channel]--; pc.pending[op.channel] <= 0 {
		delete(pc.pending, op.channel)
	}
	if s := pc.chans[op.channel]; s != nil && op.sub && pc.pending[op.channel] == 0 {
		delete(pc.chans, op.channel)
		s.conn = nil
		pc.h.rehome(s)
	}
}
