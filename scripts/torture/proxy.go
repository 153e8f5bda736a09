package main

import (
	"net"
	"sync"
	"time"
)

// proxy is a TCP proxy between one worker and redis-server. The harness
// gives every worker its own, so that it can cut, slow down or partition
// one worker (the holder) while the others go on.
type proxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	delay   time.Duration // added before forwarding each chunk, both ways
	stalled chan struct{} // non-nil while partitioned: closed when healed
	loseOne bool          // the next request goes to Redis, and its reply is lost
	closed  bool
}

func newProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is where the worker connects instead of Redis.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *proxy) pipe(down net.Conn) {
	up, err := net.DialTimeout("tcp", p.upstream, time.Second)
	if err != nil { // Redis is down: the worker sees a closed connection
		down.Close()
		return
	}
	if !p.track(down, up) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.copy(up, down, true); done <- struct{}{} }()
	go func() { p.copy(down, up, false); done <- struct{}{} }()
	<-done
	p.untrack(down, up)
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

// copy forwards src to dst chunk by chunk, holding each chunk back while
// the proxy is partitioned and delaying it while it is slow.
// A request (toRedis) that finds loseOne set goes through, and then the
// connection is cut before Redis's reply can come back.
func (p *proxy) copy(dst, src net.Conn, toRedis bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			delay, stalled := p.delay, p.stalled
			lose := toRedis && p.loseOne
			if lose {
				p.loseOne = false
			}
			p.mu.Unlock()
			if stalled != nil {
				<-stalled
			}
			if delay > 0 {
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if lose {
				// Cut this connection alone, without waiting: Redis runs
				// the command, and the reply finds the client side closed.
				src.Close()
				return
			}
		}
		if err != nil { // EOF or closed: pipe closes both sides
			return
		}
	}
}

// Cut closes every connection through the proxy; new ones go through.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// SetDelay delays every chunk by d (0: none).
func (p *proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Partition holds back every byte, both ways, until Heal: the worker's
// connections stay open but nothing reaches Redis or comes back.
func (p *proxy) Partition() {
	p.mu.Lock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
	p.mu.Unlock()
}

// Heal ends a partition. The connections that were partitioned are cut
// (their requests may have timed out on the client side, so what they
// held back must not reach Redis late); new ones go through.
func (p *proxy) Heal() {
	p.mu.Lock()
	stalled := p.stalled
	p.stalled = nil
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	if stalled != nil {
		close(stalled)
	}
}

// LoseReply makes the next request through the proxy reach Redis and its
// reply get lost: the client sees its connection closed and go-redis
// retries the command, so Redis runs it twice.
func (p *proxy) LoseReply() {
	p.mu.Lock()
	p.loseOne = true
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *proxy) Close() {
	p.ln.Close()
	p.Heal()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}
