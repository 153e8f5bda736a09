package main

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is a TCP proxy between one worker and redis-server. The harness
// gives every worker its own, so that it can cut, slow down or partition
// one worker (the holder) while the others go on.
type proxy struct {
	ln       net.Listener
	upstream string

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	delay    time.Duration // added before forwarding each chunk, both ways
	stalled  chan struct{} // non-nil while partitioned: closed when healed
	loseOne  bool          // the next request goes to Redis, and its reply is lost
	loseRate float64       // the fraction of EVAL/EVALSHA requests whose reply is lost
	closed   bool
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
	s := &session{down: down, up: up, replied: make(chan struct{})}
	done := make(chan struct{}, 2)
	go func() { p.requests(s); done <- struct{}{} }()
	go func() { p.replies(s); close(s.replied); done <- struct{}{} }()
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

// session is one client connection through the proxy and its connection
// to Redis. The proxy frames both directions (resp.go): it counts the
// requests it forwarded and the replies that came back, so that it can
// let one request run and lose its reply alone.
type session struct {
	down, up net.Conn
	sent     int64         // requests forwarded (requests goroutine only)
	loseAt   atomic.Int64  // the number of the request whose reply is lost (0: none)
	raw      atomic.Bool   // a direction was not RESP: bytes pass as they are, nothing is lost
	replied  chan struct{} // closed when the replies goroutine ends
}

// hold applies the proxy's partition and delay to one chunk.
func (p *proxy) hold() {
	p.mu.Lock()
	delay, stalled := p.delay, p.stalled
	p.mu.Unlock()
	if stalled != nil {
		<-stalled
	}
	if delay > 0 {
		time.Sleep(delay)
	}
}

// lose reports whether the request named cmd is to lose its reply: the
// one-shot lose-reply takes the next request, the rate (SetLoseRate) a
// fraction of EVAL and EVALSHA requests.
func (p *proxy) lose(cmd string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loseOne {
		p.loseOne = false
		return true
	}
	switch cmd {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO":
		return p.loseRate > 0 && rand.Float64() < p.loseRate
	}
	return false
}

// requests forwards the client's requests to Redis, whole requests at a
// time. A request that is to lose its reply is forwarded, and what the
// client sent after it is not; then this side waits for the replies side
// to read its reply from Redis (so the command has run) and cut the
// client's connection.
func (p *proxy) requests(s *session) {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := s.down.Read(buf)
		if n > 0 {
			p.hold()
			pending = append(pending, buf[:n]...)
			cut, lost := len(pending), false
			if !s.raw.Load() {
				cut = 0
				for cut < len(pending) {
					end, name, perr := respCommand(pending[cut:])
					if perr != nil {
						s.raw.Store(true)
						cut = len(pending)
						break
					}
					if end < 0 {
						break
					}
					cut += end
					s.sent++
					if p.lose(name) {
						if isSubscribe(name) {
							// No reply of its own to wait for (RESP3 answers
							// with pushes): cut at once, as a network would.
							s.up.Write(pending[:cut])
							s.down.Close()
							return
						}
						s.loseAt.Store(s.sent)
						lost = true
						break
					}
				}
			}
			if _, werr := s.up.Write(pending[:cut]); werr != nil {
				return
			}
			pending = pending[cut:]
			if lost {
				<-s.replied
				return
			}
		}
		if err != nil { // EOF or closed: pipe closes both sides
			return
		}
	}
}

func isSubscribe(cmd string) bool {
	switch cmd {
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE":
		return true
	}
	return false
}

// replies forwards Redis's replies to the client, whole replies at a
// time, and counts them (pushes answer no request); at the reply to the
// request marked lost it closes the client's connection instead.
func (p *proxy) replies(s *session) {
	buf := make([]byte, 32<<10)
	var pending []byte
	var replied int64
	for {
		n, err := s.up.Read(buf)
		if n > 0 {
			p.hold()
			pending = append(pending, buf[:n]...)
			cut := len(pending)
			if !s.raw.Load() {
				cut = 0
				for cut < len(pending) {
					end, push, perr := respReply(pending[cut:])
					if perr != nil {
						s.raw.Store(true)
						cut = len(pending)
						break
					}
					if end < 0 {
						break
					}
					if !push {
						replied++
						if at := s.loseAt.Load(); at > 0 && replied == at {
							s.down.Write(pending[:cut])
							s.down.Close()
							return
						}
					}
					cut += end
				}
			}
			if _, werr := s.down.Write(pending[:cut]); werr != nil {
				return
			}
			pending = pending[cut:]
		}
		if err != nil {
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
// reply get lost: the proxy reads the reply (the command ran) and closes
// the client's connection instead; the client sees a network error and
// go-redis retries the command, so Redis runs it twice. A (un)subscribe,
// which RESP3 answers with pushes only, is cut right after it is sent.
func (p *proxy) LoseReply() {
	p.mu.Lock()
	p.loseOne = true
	p.mu.Unlock()
}

// SetLoseRate makes a fraction f of the EVAL and EVALSHA requests through
// the proxy reach Redis and their replies get lost (0: none): go-redis
// retries each, so Redis runs those scripts twice.
func (p *proxy) SetLoseRate(f float64) {
	p.mu.Lock()
	p.loseRate = f
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
