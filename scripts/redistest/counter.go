package redistest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Counter is a go-redis hook that counts the commands a client sends, by
// name (a pipeline's one by one), each once its reply came (or its call
// failed): what a client costs, seen from the client (INFO commandstats
// sees every client of a node, and counts the commands a script runs).
type Counter struct {
	mu sync.Mutex
	n  map[string]int64
}

// NewCounter returns a Counter; add it with AddHook.
func NewCounter() *Counter { return &Counter{n: map[string]int64{}} }

func (h *Counter) add(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		h.n[c.Name()]++
	}
}

// Snapshot returns the counts so far, by command name.
func (h *Counter) Snapshot() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[string]int64, len(h.n))
	for k, v := range h.n {
		m[k] = v
	}
	return m
}

// Count returns how many commands named name (lower case) were sent so
// far.
func (h *Counter) Count(name string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[name]
}

// Scripts returns the scripts sent so far (EVALSHA and EVAL).
func (h *Counter) Scripts() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n["evalsha"] + h.n["eval"]
}

// ScriptsQuiet reports whether, within d, the counted clients went quiet
// (sent no script) for quiet: a period the caller knows a script would
// come in (a timer's), so that silence tells a state.
func (h *Counter) ScriptsQuiet(d, quiet time.Duration) bool {
	last, since := h.Scripts(), time.Now()
	return Within(d, func() bool {
		if n := h.Scripts(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet
	})
}

func (h *Counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.add(cmd)
		return err
	}
}

func (h *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.add(cmds...)
		return err
	}
}

// CountingDialer returns a go-redis Dialer (Options.Dialer,
// ClusterOptions.Dialer) that adds one to n for each connection it
// opens: command, pipeline and pub/sub connections alike.
func CountingDialer(n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}
