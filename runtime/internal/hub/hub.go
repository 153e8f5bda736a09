// Package hub multiplexes every wait of one client onto its pub/sub
// connections (classic, or sharded on a Redis 7 cluster), and decides
// which of a channel's waiters a message wakes. Package runtime's wait
// loop and delay timer subscribe, join and leave through it.
package hub

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Hub multiplexes every wait of one client onto its pub/sub connections.
// Channels are reference-counted: the first waiter subscribes, the last
// one leaves. The first part of this file is the connection layer:
// subscribing, confirming, lingering, reconnecting, following slots. Who
// a message wakes is the waiters' part, below (deliver).
//
// Classic or sharded pub/sub is chosen once per client (see Sharded): on
// a single node, Sentinel, a Ring, or a cluster older than Redis 7.0 the
// hub has one connection (classic SUBSCRIBE); on a Redis 7+ cluster it has
// one connection per primary and subscribes each channel with SSUBSCRIBE
// on the primary that owns the channel's slot (a channel shares its key's
// hash tag).
//
// Each connection is one go-redis PubSub read by one goroutine of the hub
// (Receive, not Channel: Channel drops the server's unsubscribe notices)
// and written by another, in order. The server answers each channel of a
// subscribe or unsubscribe with one reply, in order (a run of them is
// written as one command, on a classic connection): the
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
type Hub struct {
	rdb          redis.UniversalClient
	mode         atomic.Int32 // modeUnknown, modeClassic or modeSharded
	allowSharded bool         // sharded pub/sub may be chosen

	mu       sync.Mutex
	subs     map[string]*Subscription
	conns    map[string]*psConn         // by shard address; "" in classic mode
	homeless map[*Subscription]struct{} // subscriptions waiting for a route
	homeKick chan struct{}              // wakes the rehoming goroutine
	homing   bool                       // the rehoming goroutine runs
	closed   bool
	done     chan struct{}
	// primed is set once the hub opened a connection to every primary
	// (sharded mode: prime).
	primed atomic.Bool

	// OnLost, when set before use, learns of a failed connection and the
	// channels it subscribes again (the client's observers).
	OnLost func(addr string, chans []string, cause error)
}

const (
	modeUnknown int32 = iota
	modeClassic
	modeSharded
)

type Subscription struct {
	channel string
	refs    int
	ready   chan struct{} // closed once the subscription is confirmed
	isReady bool
	conn    *psConn    // the connection it is subscribed on; nil while routed
	waiters waiterList // in arrival order
	// unclaimed holds messages naming an owner that has not joined yet
	// (deliver).
	unclaimed map[string]string
	// woke is when a message (or a reconnect) last woke every waiter:
	// a waiter that registered before it but joined after it missed it
	// (BroadcastSince).
	woke   time.Time
	linger *time.Timer // drops the channel once it has been unused for Linger
}

// psConn is one pub/sub connection: the whole client's in classic mode,
// one primary's in sharded mode. Its fields are guarded by hub.mu.
type psConn struct {
	h       *Hub
	addr    string        // "" in classic mode
	node    *redis.Client // the primary, in sharded mode
	sharded bool

	ps      *redis.PubSub            // replaced when its connection fails
	chans   map[string]*Subscription // subscribed (or being subscribed) here
	ops     []psOp                   // commands not written yet, in order
	sent    []psOp                   // commands whose reply is due, in order
	pending map[string]int           // len(sent) per channel
	kick    chan struct{}            // wakes the writer
	stopped bool
}

// maxChannelsPerOp bounds the channels of one (un)subscribe command.
const maxChannelsPerOp = 256

type psOp struct {
	channel string
	sub     bool // subscribe, or unsubscribe
}

// Timings of the connection layer.
const (
	// confirmWait bounds how long subscribe waits for the server's
	// confirmation; the caller's fallback timer covers the rest.
	confirmWait = time.Second
	// Linger is how long a channel stays subscribed after its last waiter
	// left. A client's next wait within it (the next spell of contention
	// on the object, or on any object of its namespace, which share a
	// channel on a node) finds the channel ready: no SUBSCRIBE, no second
	// attempt once subscribed (waitFor), no UNSUBSCRIBE, about 8 commands.
	// Meanwhile the connection is pinged as for a waiter (HealthEvery): at
	// most 3 PINGs, under half of one subscription again; once the
	// channels are gone an idle client sends nothing.
	Linger = 3 * HealthEvery
	// HealthEvery is how long a connection with channels subscribed may
	// be silent before the hub pings it; a second silence of that length
	// throws it away. A connection without channels is not pinged. It is
	// the waiter registry's refresh period (LiveRegistryTTL/3): a client
	// whose goroutines wait costs a ping every 10 s, and a heartbeat (or
	// a refresh per object it waits on: TestWaitingCostPerClient,
	// BenchmarkWaitingCostPerKey).
	HealthEvery = 10 * time.Second
	// opTimeout bounds one write (and the dial it may need).
	opTimeout = 5 * time.Second
	// maxBackoff caps the pause between reconnection and rerouting
	// attempts while Redis is unreachable.
	maxBackoff = 500 * time.Millisecond
)

func New(rdb redis.UniversalClient, allowSharded bool) *Hub {
	return &Hub{
		rdb: rdb, allowSharded: allowSharded, subs: map[string]*Subscription{}, conns: map[string]*psConn{},
		homeless: map[*Subscription]struct{}{}, homeKick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// Probed reports whether the pub/sub mode is known (see Sharded).
func (h *Hub) Probed() bool { return h.mode.Load() != modeUnknown }

// IsSharded reports whether the mode is known to be sharded pub/sub.
func (h *Hub) IsSharded() bool { return h.mode.Load() == modeSharded }

// Joined returns how many waiters have joined the subscription of
// channel (0 when it is not subscribed), for tests.
func (h *Hub) Joined(channel string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[channel]
	if s == nil {
		return 0
	}
	n := 0
	for range s.waiters.each {
		n++
	}
	return n
}

// Sharded reports whether this client uses sharded pub/sub: only a
// *redis.ClusterClient whose servers answer PUBSUB SHARDNUMSUB (Redis
// 7.0+) does. The answer is probed on first need and kept for the life of
// the client; a probe that fails to reach Redis is not kept, and the
// error is returned.
func (h *Hub) Sharded(ctx context.Context) (bool, error) {
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

// Subscribe adds a reference to channel and waits until the subscription
// is confirmed by the server, or at most confirmWait: a subscription that
// is confirmed later wakes the waiters that joined it meanwhile. It
// returns impl.ErrClosed after close, or ctx's error.
func (h *Hub) Subscribe(ctx context.Context, channel string) (*Subscription, error) {
	s, err := h.join(ctx, channel)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(confirmWait)
	defer t.Stop()
	return h.confirmed(ctx, s, t.C)
}

// SubscribeMany is Subscribe for many channels at once, from one
// goroutine: every channel is subscribed before the first confirmation
// is waited for, and the waits share one confirmWait. Its results are in
// the channels' order.
func (h *Hub) SubscribeMany(ctx context.Context, channels []string) ([]*Subscription, []error) {
	subs, errs := make([]*Subscription, len(channels)), make([]error, len(channels))
	for i, ch := range channels {
		subs[i], errs[i] = h.join(ctx, ch)
	}
	t := time.NewTimer(confirmWait)
	defer t.Stop()
	expired := false
	for i, sub := range subs {
		if errs[i] != nil {
			continue
		}
		if expired {
			// (confirmWait has passed: what is not confirmed is
			// returned as it is, as Subscribe returns it then.)
			subs[i], errs[i] = h.confirmed(ctx, sub, closedChan)
			continue
		}
		subs[i], errs[i] = h.confirmed(ctx, sub, t.C)
		if errs[i] == nil && !h.isReady(sub) {
			expired = true
		}
	}
	return subs, errs
}

// closedChan is a closed channel: a wait on it is over at once.
var closedChan = func() chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// join adds a reference to channel, subscribing it when it is new.
func (h *Hub) join(ctx context.Context, channel string) (*Subscription, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, impl.ErrClosed
	}
	s := h.subs[channel]
	fresh := s == nil
	if fresh {
		s = &Subscription{channel: channel, ready: make(chan struct{})}
		h.subs[channel] = s
	}
	s.refs++
	h.mu.Unlock()
	if fresh {
		h.route(ctx, s)
	}
	return s, nil
}

// isReady reports whether s's subscription is confirmed.
func (h *Hub) isReady(s *Subscription) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return s.isReady
}

// confirmed waits until s is confirmed or expired fires (s is returned
// then too), and drops the reference join took when the hub closes or
// ctx ends first.
func (h *Hub) confirmed(ctx context.Context, s *Subscription, expired <-chan time.Time) (*Subscription, error) {
	h.mu.Lock()
	ready, isReady := s.ready, s.isReady
	h.mu.Unlock()
	if isReady {
		return s, nil
	}
	select {
	case <-ready:
		return s, nil
	case <-expired:
		return s, nil
	case <-h.done:
		h.Unsubscribe(s)
		return nil, impl.ErrClosed
	case <-ctx.Done():
		h.Unsubscribe(s)
		return nil, ctx.Err()
	}
}

// route finds the connection for s and subscribes it there, or leaves it
// to the rehoming goroutine when that needs Redis and Redis cannot be
// reached.
func (h *Hub) route(ctx context.Context, s *Subscription) {
	addr, node, err := h.owner(ctx, s.channel)
	if err == nil && node != nil && !h.primed.Load() {
		h.prime(ctx)
	}
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
func (h *Hub) owner(ctx context.Context, channel string) (string, *redis.Client, error) {
	sharded, err := h.Sharded(ctx)
	if err != nil || !sharded {
		return "", nil, err
	}
	node, err := h.rdb.(*redis.ClusterClient).MasterForKey(ctx, channel)
	if err != nil {
		return "", nil, err
	}
	return node.Options().Addr, node, nil
}

// prime opens the connection to every primary of the cluster that has
// none yet, when the hub's first sharded channel is routed: a client that
// waits on one primary will likely wait on the others, and a channel
// subscribed on a connection that is up is confirmed in one round trip,
// where a new connection's dial and handshake come first. Until then a
// release finds no receiver for a waiter that just registered, and passes
// it over (it registers again: a script more). The cost is an idle
// connection per primary, which sends nothing (read) until a channel is
// subscribed on it. The slot map is the client's cached one; when it
// cannot be had, prime does nothing and the next channel routed tries
// again. Two primes at once open each connection once (connTo).
func (h *Hub) prime(ctx context.Context) {
	var mu sync.Mutex
	var nodes []*redis.Client
	err := h.rdb.(*redis.ClusterClient).ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, node)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return // (the next channel routed tries again)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	for _, node := range nodes {
		h.connTo(node.Options().Addr, node)
	}
	h.primed.Store(true)
}

// connTo returns the connection for addr, opening it if needed. h.mu
// must be held.
func (h *Hub) connTo(addr string, node *redis.Client) *psConn {
	pc := h.conns[addr]
	if pc == nil {
		pc = &psConn{h: h, addr: addr, node: node, sharded: node != nil,
			chans: map[string]*Subscription{}, pending: map[string]int{}, kick: make(chan struct{}, 1)}
		pc.ps = pc.newPubSub()
		h.conns[addr] = pc
		go pc.read()
		go pc.write()
	}
	return pc
}

// attach subscribes s on the connection for addr, creating it if needed.
// h.mu must be held.
func (h *Hub) attach(s *Subscription, addr string, node *redis.Client) {
	pc := h.connTo(addr, node)
	s.conn = pc
	pc.chans[s.channel] = s
	pc.send(s.channel, true)
}

// rehome queues s for the rehoming goroutine, which routes it again after
// a pause. h.mu must be held.
func (h *Hub) rehome(s *Subscription) {
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
func (h *Hub) unready(s *Subscription) {
	if s.isReady {
		s.isReady = false
		s.ready = make(chan struct{})
	}
}

// rehoming routes the homeless subscriptions, retrying with a growing
// pause while that fails. On a cluster it asks go-redis to reload the slot
// map first, since a moved slot or a failed primary is why they are
// homeless.
func (h *Hub) rehoming() {
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
			var todo []*Subscription
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
// stays subscribed for Linger after its last waiter leaves: the next
// waiter, under contention or at the next, finds it ready without a
// round trip.
func (h *Hub) Unsubscribe(s *Subscription) {
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
		s.linger = time.AfterFunc(Linger, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if s.refs == 0 && !h.closed && h.subs[s.channel] == s {
				h.drop(s)
			}
		})
	} else {
		s.linger.Reset(Linger)
	}
}

// drop unsubscribes s's channel. h.mu must be held.
func (h *Hub) drop(s *Subscription) {
	delete(h.subs, s.channel)
	delete(h.homeless, s)
	if pc := s.conn; pc != nil {
		s.conn = nil
		delete(pc.chans, s.channel)
		pc.send(s.channel, false)
	}
}

// closedCh is closed when the hub is closed.
func (h *Hub) Closed() <-chan struct{} { return h.done }

// isClosed reports whether the hub is closed.
func (h *Hub) IsClosed() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

func (h *Hub) Close() {
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
		// A run of subscribes (or unsubscribes) goes in one command: the
		// server still answers each channel with its own reply, in order.
		// (Not sharded ones: their channels would have to share a slot.)
		for len(ops) > 0 {
			n := 1
			for !pc.sharded && n < len(ops) && n < maxChannelsPerOp && ops[n].sub == ops[0].sub {
				n++
			}
			chans := make([]string, n)
			for i, op := range ops[:n] {
				chans[i] = op.channel
			}
			sub := ops[0].sub
			ops = ops[n:]
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			var err error
			switch {
			case sub && pc.sharded:
				err = ps.SSubscribe(ctx, chans...)
			case sub:
				err = ps.Subscribe(ctx, chans...)
			case pc.sharded:
				err = ps.SUnsubscribe(ctx, chans...)
			default:
				err = ps.Unsubscribe(ctx, chans...)
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
		msg, err := ps.ReceiveTimeout(context.Background(), HealthEvery)
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
			h.mu.Lock()
			idle := len(pc.chans) == 0 && len(pc.ops) == 0 && len(pc.sent) == 0
			h.mu.Unlock()
			if idle {
				// Nothing subscribed, nothing due: a silence loses
				// nothing, so an idle client costs Redis no pings. A
				// connection that died meanwhile fails the next
				// subscribe's write, or its first silence then.
				continue
			}
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
		if h.OnLost != nil && backoff == 0 && !stopped {
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
func (h *Hub) lost(addr string, chans []string, cause error) {
	if h.OnLost != nil {
		h.OnLost(addr, chans, cause)
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

// The waiters of one client on one channel, and who a message wakes. The
// connection layer is above; h.mu guards everything here.
//
// A message whose payload names an owner ("<clientID>:<n>", then maybe
// more words) is for the waiter of that owner alone: a kind with a waiter
// registry in Redis (see "Waiter registry" in docs/design.md) tells each
// woken waiter by name, on its client's channel. Such a message that
// comes before its waiter joined (the waiter's attempt registered it, and
// the release was quicker than the attempt's reply) is kept for it. A
// message whose payload is "all" wakes every waiter (an operator's change,
// a reconnect). Any other message wakes one waiter of the client (the
// longest waiting one that has no signal pending): a waiter joins the
// channel's queue before it tries to acquire, so a release published
// after the attempt always wakes it, and one that leaves without the lock
// passes such a signal on.

// Waiter is one goroutine waiting on a subscription, or a watch.
type Waiter struct {
	owner  string        // the owner messages name it by; "" for none
	signal chan struct{} // capacity 1: a pending wake-up (maybe shared, see joinAs)
	notify func(string)  // a watch's: called with the payload instead of signalling
	msg    string        // the last message naming owner, until taken

	prev, next *Waiter     // in its subscription's waiterList
	list       *waiterList // the list it is in; nil once it left
}

// waiterList is a subscription's waiters in arrival order, indexed by
// owner, so that joining, leaving and a message naming an owner cost the
// same however many waiters share the channel (a client's waits on every
// object of a namespace share one with classic pub/sub). h.mu guards it.
type waiterList struct {
	head, tail *Waiter
	// byOwner holds each owner's longest-waiting waiter. An owner carried
	// in a context may wait on two objects of a namespace at once: twins
	// counts the waiters whose owner had one already, and only while it
	// is not 0 does a leave look for the next waiter of its owner.
	byOwner map[string]*Waiter
	twins   int
}

// push appends w.
func (l *waiterList) push(w *Waiter) {
	w.list, w.prev, w.next = l, l.tail, nil
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next = w
	}
	l.tail = w
	if w.owner == "" {
		return
	}
	if l.byOwner == nil {
		l.byOwner = map[string]*Waiter{}
	}
	if _, ok := l.byOwner[w.owner]; ok {
		l.twins++
	} else {
		l.byOwner[w.owner] = w
	}
}

// remove takes w out, when it is in l.
func (l *waiterList) remove(w *Waiter) {
	if w.list != l {
		return
	}
	if w.prev == nil {
		l.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		l.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	next := w.next
	w.list, w.prev, w.next = nil, nil, nil
	if w.owner == "" {
		return
	}
	if l.byOwner[w.owner] != w { // a twin leaves
		l.twins--
		return
	}
	delete(l.byOwner, w.owner)
	if l.twins == 0 {
		return
	}
	for x := next; x != nil; x = x.next { // its owner's next waiter, if any
		if x.owner == w.owner {
			l.byOwner[w.owner] = x
			l.twins--
			return
		}
	}
}

// ofOwner returns the longest-waiting waiter of owner, or nil.
func (l *waiterList) ofOwner(owner string) *Waiter { return l.byOwner[owner] }

// each yields the waiters in arrival order; yield must not change l.
func (l *waiterList) each(yield func(*Waiter) bool) {
	for w := l.head; w != nil; w = w.next {
		if !yield(w) {
			return
		}
	}
}

// WakeAll is the message payload that wakes every waiter of a channel.
const wakeAll = "all"

// deliver handles a message on s's channel. h.mu must be held.
func (h *Hub) deliver(s *Subscription, payload string) {
	if payload == wakeAll {
		h.broadcast(s)
		return
	}
	owner, _, _ := strings.Cut(payload, " ")
	if !strings.Contains(owner, ":") {
		h.wakeOneWith(s, payload)
		return
	}
	if w := s.waiters.ofOwner(owner); w != nil {
		w.msg = payload
		w.wake()
		return
	}
	if len(s.unclaimed) >= maxUnclaimed {
		clear(s.unclaimed) // of waiters that left: their scripts handed on
	}
	if s.unclaimed == nil {
		s.unclaimed = map[string]string{}
	}
	s.unclaimed[owner] = payload
}

// maxUnclaimed bounds the messages a subscription keeps for owners not
// joined. A message lost this way costs its waiter one refresh interval.
const maxUnclaimed = 64

// joinAs queues a new waiter on s for owner: messages naming owner wake
// it alone, also one that came before it joined. It is woken on signal
// (capacity 1), which the waiters of one wait on several channels share.
func (h *Hub) JoinAs(s *Subscription, owner string, signal chan struct{}) *Waiter {
	w := &Waiter{owner: owner, signal: signal}
	h.mu.Lock()
	if m, ok := s.unclaimed[owner]; ok && owner != "" {
		delete(s.unclaimed, owner)
		w.msg = m
		w.wake()
	}
	if h.closed { // closed since it subscribed: the wait sees it at once
		w.wake()
	}
	s.waiters.push(w)
	h.mu.Unlock()
	return w
}

// watch queues a waiter on s that calls notify (with the hub's lock held,
// so notify must not block nor call the hub) on every wake-up, with the
// message's payload ("" for a wake-up that is not a message), instead of
// signalling a goroutine: the delay scheduler watches many channels from
// one goroutine. It leaves with leave.
func (h *Hub) Watch(s *Subscription, notify func(payload string)) *Waiter {
	w := &Waiter{notify: notify}
	h.mu.Lock()
	s.waiters.push(w)
	h.mu.Unlock()
	return w
}

// message returns the message naming w's owner that woke it, if one did,
// and forgets it.
func (h *Hub) Message(w *Waiter) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := w.msg
	w.msg = ""
	return m
}

// BroadcastSince reports whether every waiter of s was woken ("all", or a
// reconnect) after t: a waiter whose attempt registered it in Redis at t
// and that joined s only afterwards missed that wake-up (unlike a message
// naming its owner, which is kept for it) and must try again.
func (h *Hub) BroadcastSince(s *Subscription, t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return s.woke.After(t)
}

// WokeSince reports whether every waiter of channel was woken ("all", or
// a reconnect) after t, or channel is not subscribed.
func (h *Hub) WokeSince(channel string, t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[channel]
	return s == nil || s.woke.After(t)
}

// ready reports whether channel is subscribed and confirmed now.
func (h *Hub) Ready(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subs[channel]
	return s != nil && s.isReady
}

// leave removes w from s; a wake-up w received but did not use (it leaves
// without the lock) goes to the next waiter, unless it was a message
// naming w (the registry's scripts hand such a wake-up on in Redis).
func (h *Hub) Leave(s *Subscription, w *Waiter, used bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.waiters.remove(w)
	select {
	case <-w.signal:
		if !used && w.msg == "" {
			h.wakeOne(s)
		}
	default:
	}
}

// broadcast wakes every waiter of s. h.mu must be held.
func (h *Hub) broadcast(s *Subscription) {
	s.woke = time.Now()
	for w := range s.waiters.each {
		w.wake()
	}
}

// wakeOne wakes the first waiter of s without a pending wake-up. h.mu must
// be held.
func (h *Hub) wakeOne(s *Subscription) { h.wakeOneWith(s, "") }

// wakeOneWith is wakeOne for a message with payload, which a watch is
// given.
func (h *Hub) wakeOneWith(s *Subscription, payload string) {
	for w := range s.waiters.each {
		if w.wakeWith(payload) {
			return
		}
	}
}

// wake gives w a wake-up unless it has one pending; it reports whether it
// did.
func (w *Waiter) wake() bool { return w.wakeWith("") }

// wakeWith is wake for a message with payload, which a watch is given.
func (w *Waiter) wakeWith(payload string) bool {
	if w.notify != nil {
		w.notify(payload)
		return true
	}
	select {
	case w.signal <- struct{}{}:
		return true
	default:
		return false
	}
}
