package rdb

import (
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Lane sends the commands that many goroutines of a client issue at once
// in pipelines: a command that finds the lane idle is sent at once, on
// its own; commands that come while the lane's pipelines are in flight
// wait for the next one, which carries all of them (at most laneBatch).
// A lane has at most laneFlights pipelines in flight, so that it holds at
// most that many connections of the go-redis pool whatever the number of
// its callers: 10 000 Takes that register at once cost about a hundred
// round trips, and leave the pool to the client's other calls. The
// runtime keeps a lane for queue consumers' takes, one for their
// registrations, one for the delay timer's moves, so that a move never
// queues behind waits, and one for offers.
//
// A command sent in a lane behaves as if sent alone: go-redis retries a
// pipeline that met a connection error as it retries a command, and each
// command gets its own reply or error.
type Lane struct {
	mu      sync.Mutex
	queue   []*laneCall
	flights int
}

type laneCall struct {
	ctx   context.Context
	cmd   redis.Cmder
	done  chan struct{}
	taken bool // in a flight (l.mu)
	// Set under l.mu: its reply came (the flight is over), and what to
	// run on it then because its caller gave up while it was in flight.
	finished bool
	late     func()
}

const (
	// laneFlights is how many pipelines a lane has in flight at most.
	laneFlights = 2
	// laneBatch is the most commands one pipeline carries.
	laneBatch = 256
)

// Do sends cmd in the lane and waits for its reply. A command alone is
// sent under ctx; a pipeline under none (go-redis' timeouts bound it): a
// caller bounds its own wait (within, readValue), as it would for a
// command sent alone.
func (l *Lane) Do(ctx context.Context, r redis.UniversalClient, cmd redis.Cmder) {
	call := &laneCall{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	l.mu.Lock()
	l.queue = append(l.queue, call)
	start := l.flights < laneFlights
	if start {
		l.flights++
	}
	l.mu.Unlock()
	if start {
		l.fly(r)
	}
	<-call.done
}

// DoWithin is Do that returns once ctx ends, reporting false: a command
// still queued then is withdrawn (it was never sent), one in flight may
// have run. Only after true may the caller read cmd.
func (l *Lane) DoWithin(ctx context.Context, r redis.UniversalClient, cmd redis.Cmder) bool {
	return l.DoWithinOr(ctx, ctx, r, cmd, nil)
}

// DoWithinOr is DoWithin with the command sent under sctx (a command sent
// alone is bounded by its deadline; sctx need not end with ctx) while the
// wait ends with ctx, and late (if not nil) run on its own goroutine once
// the reply of a command cut short in flight comes (a take's items are
// given back then). A reply that came by the time ctx ended is used: true.
// It costs the caller no goroutine of its own.
func (l *Lane) DoWithinOr(sctx, ctx context.Context, r redis.UniversalClient, cmd redis.Cmder, late func()) bool {
	if ctx.Done() == nil {
		l.Do(sctx, r, cmd)
		return true
	}
	call := &laneCall{ctx: sctx, cmd: cmd, done: make(chan struct{})}
	l.mu.Lock()
	l.queue = append(l.queue, call)
	start := l.flights < laneFlights
	if start {
		l.flights++
	}
	l.mu.Unlock()
	if start {
		go l.fly(r)
	}
	select {
	case <-call.done:
		return true
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case call.finished:
		return true
	case !call.taken:
		if i := slices.Index(l.queue, call); i >= 0 {
			l.queue = slices.Delete(l.queue, i, i+1)
		}
	default:
		call.late = late
	}
	return false
}

// Queued returns how many calls wait in the lane for a flight.
func (l *Lane) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// fly sends one pipeline of what the lane has queued (the caller that
// started it finds its own command there), and leaves the rest to a new
// flight, so that its caller returns as soon as its reply came.
func (l *Lane) fly(r redis.UniversalClient) {
	l.mu.Lock()
	n := min(len(l.queue), laneBatch)
	if n == 0 {
		l.flights--
		l.mu.Unlock()
		return
	}
	calls := make([]*laneCall, n)
	copy(calls, l.queue)
	for _, c := range calls {
		c.taken = true
	}
	rest := copy(l.queue, l.queue[n:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	l.mu.Unlock()
	if len(calls) == 1 {
		_ = r.Process(calls[0].ctx, calls[0].cmd)
	} else {
		ctx := context.Background()
		pipe := r.Pipeline()
		for _, c := range calls {
			_ = pipe.Process(ctx, c.cmd)
		}
		_, _ = pipe.Exec(ctx) // errors are per command
	}
	var lates []func()
	l.mu.Lock()
	for _, c := range calls {
		c.finished = true
		if c.late != nil {
			lates = append(lates, c.late)
		}
	}
	l.mu.Unlock()
	for _, c := range calls {
		close(c.done)
	}
	for _, f := range lates {
		go f()
	}
	l.mu.Lock()
	more := len(l.queue) > 0
	if !more {
		l.flights--
	}
	l.mu.Unlock()
	if more {
		go l.fly(r)
	}
}

// EvalIn is Eval sent in lane l (see Lane): a script that answers NOSCRIPT
// is sent again in the lane, as EVAL.
func (c *Conn) EvalIn(ctx context.Context, l *Lane, s *impl.Script, keys []string, args ...any) *redis.Cmd {
	return c.evalIn(ctx, s, keys, args, func(cmd *redis.Cmd) bool {
		l.Do(ctx, c.R, cmd)
		return true
	})
}

// EvalWithin is EvalIn that returns by ctx's end (see Lane.DoWithin): a
// script withdrawn before it was sent fails with ctx's error and did not
// run; one cut short in flight fails with it and may have run.
func (c *Conn) EvalWithin(ctx context.Context, l *Lane, s *impl.Script, keys []string, args ...any) *redis.Cmd {
	return c.evalIn(ctx, s, keys, args, func(cmd *redis.Cmd) bool { return l.DoWithin(ctx, c.R, cmd) })
}

// EvalWithinOr is EvalIn sent under sctx that returns by ctx's end (see
// Lane.DoWithinOr): a script withdrawn before it was sent fails with
// ctx's error and did not run; one cut short in flight fails with it, and
// late runs on its command once its reply comes.
func (c *Conn) EvalWithinOr(sctx, ctx context.Context, l *Lane, s *impl.Script, keys []string, late func(*redis.Cmd), args ...any) *redis.Cmd {
	cut := false
	cmd := c.evalIn(sctx, s, keys, args, func(cmd *redis.Cmd) bool {
		var f func()
		if late != nil {
			f = func() { late(cmd) }
		}
		cut = !l.DoWithinOr(sctx, ctx, c.R, cmd, f)
		return !cut
	})
	if cut {
		return Failed(ctx, ctx.Err())
	}
	return cmd
}

// evalIn sends s's EVALSHA with send (a lane's; false: it gave up by
// ctx's end), and after NOSCRIPT the source, as EVAL, with send too (so a
// bounded wait stays bounded).
func (c *Conn) evalIn(ctx context.Context, s *impl.Script, keys []string, args []any, send func(*redis.Cmd) bool) *redis.Cmd {
	if s.Err != nil {
		return Failed(ctx, s.Err)
	}
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", s.SHA1, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(ctx, cmdArgs...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	if !send(cmd) {
		return Failed(ctx, ctx.Err())
	}
	if IsNoScript(cmd.Err()) {
		// The source goes the same way, bounded as the first send was.
		c.noScript(ctx, s, args)
		cmdArgs = slices.Clone(cmdArgs) // the sent command may still hold them
		cmdArgs[0], cmdArgs[1] = "eval", s.Source
		cmd = redis.NewCmd(ctx, cmdArgs...)
		if len(keys) > 0 {
			cmd.SetFirstKeyPos(3)
		}
		if !send(cmd) {
			return Failed(ctx, ctx.Err())
		}
	}
	c.ReloadOnConnError(cmd.Err())
	return cmd
}
