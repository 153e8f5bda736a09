package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/delay"
)

// The worker: Serve runs a handler on a reliable queue's items.

// ErrSkipRetry, wrapped in a handler's error, dead-letters the item at
// once instead of retrying it.
var ErrSkipRetry = errors.New("lockgen: skip retry")

// ErrHandlerTimeout is the cause of a handler context's cancellation when
// the item's WithTimeout ran out; the attempt counts as failed.
var ErrHandlerTimeout = errors.New("lockgen: handler timed out")

// ErrShutdown is the cause of a handler context's cancellation when the
// worker's shutdown deadline passed; the item goes back unharmed.
var ErrShutdown = errors.New("lockgen: worker shut down")

// PanicError is the failure of an attempt whose handler panicked: the
// item is retried like any failure, with the panic recorded as the
// reason.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the handler goroutine's stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }

// Job describes the item a handler is running for; JobFrom returns it
// from the handler's context.
type Job struct {
	Queue    string    // the queue's name in the spec
	Key      string    // the queue's key
	ID       string    // the item's id, the same across deliveries
	Attempt  int       // 1 for the first delivery
	Deadline time.Time // when the visibility timeout runs out, extended while the handler runs
}

type jobKey struct{}

// JobFrom returns the job a handler's context carries, and whether it
// carries one.
func JobFrom(ctx context.Context) (Job, bool) {
	j, ok := ctx.Value(jobKey{}).(Job)
	return j, ok
}

// Middleware wraps every attempt of a worker: it may look at the job
// (JobFrom), change the context, and must call next to run the handler
// (or return an error instead, a failed attempt). Middleware given first
// runs outermost.
type Middleware func(ctx context.Context, next func(context.Context) error) error

// Backoff returns how long to wait before delivering an item again after
// its attempt-th delivery failed with err.
type Backoff func(attempt int, err error) time.Duration

// ExponentialBackoff returns a Backoff of base·2^(attempt-1), capped at
// max, with equal jitter: a random duration in [d/2, d].
func ExponentialBackoff(base, max time.Duration) Backoff {
	return func(attempt int, _ error) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		d = min(d, max)
		if d <= 0 {
			return 0
		}
		half := d / 2
		return half + rand.N(d-half+1)
	}
}

// workerConfig is what WorkerOptions set.
type workerConfig struct {
	concurrency int
	timeout     time.Duration
	shutdown    time.Duration
	backoff     Backoff
	middleware  []Middleware
	onError     func(Job, error)
}

// WorkerOption configures Serve.
type WorkerOption func(*workerConfig)

// WithConcurrency sets how many items the worker handles at once (default
// 1). Its workers take together: a claim (TakeN) takes an item for each
// idle worker, with one claim under way per 8 workers at most, and a
// claim that waits holds no connection of the go-redis pool.
func WithConcurrency(n int) WorkerOption { return func(c *workerConfig) { c.concurrency = n } }

// WithTimeout bounds each attempt: the handler's context is cancelled
// with ErrHandlerTimeout as cause after d, and the attempt fails. While
// the handler runs, the worker extends the item's visibility, so a long
// handler is not redelivered to another consumer meanwhile. 0 (the
// default) sets no bound.
func WithTimeout(d time.Duration) WorkerOption { return func(c *workerConfig) { c.timeout = d } }

// WithShutdownTimeout sets how long the handlers running when Serve's
// context ends may take to finish (default 30s); then their contexts are
// cancelled with ErrShutdown as cause and their items go back to the
// queue unharmed, not counted as a delivery.
func WithShutdownTimeout(d time.Duration) WorkerOption {
	return func(c *workerConfig) { c.shutdown = d }
}

// WithBackoff sets how long a failed item waits before it is delivered
// again (default ExponentialBackoff(time.Second, 10*time.Minute)).
func WithBackoff(b Backoff) WorkerOption { return func(c *workerConfig) { c.backoff = b } }

// WithMiddleware adds middleware around every attempt.
func WithMiddleware(m ...Middleware) WorkerOption {
	return func(c *workerConfig) { c.middleware = append(c.middleware, m...) }
}

// WithErrorHandler sets a function called with every failed attempt's
// error (the handler's, a timeout, a panic) and with errors the worker
// rides out (taking, acknowledging); the default ignores them.
func WithErrorHandler(f func(Job, error)) WorkerOption {
	return func(c *workerConfig) { c.onError = f }
}

// settleTimeout bounds an acknowledgement or give-back by the worker,
// which runs after the handler whatever the contexts say.
const settleTimeout = 10 * time.Second

// Serve runs handler on the queue's items until ctx ends, then shuts down
// gracefully: it takes nothing more, lets the running handlers finish
// within the shutdown timeout, and puts the items of those that did not
// back unharmed. An item whose handler returns nil is acknowledged; one
// whose handler fails, panics (a PanicError) or times out is delivered
// again after the backoff, until the spec's maxDeliveries, and then goes
// to the dead letters with the last error; an error wrapping ErrSkipRetry
// dead-letters it at once. Items that do not decode go to the dead
// letters without reaching the handler. Errors taking items (Redis down)
// are ridden out with backoff.
//
// Serve returns nil after a graceful shutdown, ErrClosed when the client
// was closed, or ErrInvalidArgument for a bad option.
func (q *ReliableQueue[T]) Serve(ctx context.Context, handler func(ctx context.Context, item T) error, opts ...WorkerOption) error {
	cfg := workerConfig{concurrency: 1, shutdown: 30 * time.Second, backoff: ExponentialBackoff(time.Second, 10*time.Minute)}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case handler == nil:
		return fmt.Errorf("%w: nil handler", ErrInvalidArgument)
	case cfg.concurrency < 1:
		return fmt.Errorf("%w: concurrency %d", ErrInvalidArgument, cfg.concurrency)
	case cfg.timeout < 0, cfg.shutdown < 0:
		return fmt.Errorf("%w: negative timeout", ErrInvalidArgument)
	case cfg.backoff == nil:
		return fmt.Errorf("%w: nil backoff", ErrInvalidArgument)
	}
	if err := q.q.c.checkOpen(); err != nil {
		return err
	}
	// Handlers run under hctx: ctx's values, not its cancellation, until
	// the shutdown timeout after ctx ends.
	hctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stop(nil)
	go func() {
		select {
		case <-ctx.Done():
		case <-hctx.Done():
			return
		}
		t := time.NewTimer(cfg.shutdown)
		defer t.Stop()
		select {
		case <-t.C:
			stop(ErrShutdown)
		case <-hctx.Done():
		}
	}()
	// The workers take together: a claim (TakeN) takes an item for each
	// idle worker (a token in idle), and hands them over on items.
	var wg sync.WaitGroup
	idle := make(chan struct{}, cfg.concurrency)
	items := make(chan *Delivery[T])
	// A worker is idle again once its handler returned: its delivery is
	// settled (acknowledged, given back) on a goroutine of its own while
	// the worker takes its next item, at most one settle a worker under
	// way (settling), so that the acknowledgements of workers that finish
	// together share their round trips (rdb.Conn's Settles lane) and a
	// worker's next claim does not wait for them.
	settling := make(chan struct{}, cfg.concurrency)
	var swg sync.WaitGroup // the settles, which Serve waits for
	for range cfg.concurrency {
		idle <- struct{}{}
		wg.Go(func() {
			for d := range items {
				settle := q.handle(hctx, d, handler, &cfg)
				settling <- struct{}{}
				swg.Go(func() {
					settle()
					<-settling
				})
				idle <- struct{}{}
			}
		})
	}
	var fwg sync.WaitGroup
	errs := make(chan error, fetchers(cfg.concurrency))
	for range fetchers(cfg.concurrency) {
		fwg.Go(func() { errs <- q.fetch(ctx, idle, items, &cfg) })
	}
	fwg.Wait()
	close(items)
	wg.Wait()
	swg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fetchers is how many claims a worker of the given concurrency keeps
// waiting at most: one per eight workers, so that workers that become
// idle while a claim waits have another one, and a claim takes for as
// many idle workers as it can: fewer, larger claims (BenchmarkWorker;
// scripts/bench/README.md).
func fetchers(concurrency int) int { return (concurrency + 7) / 8 }

// fetch claims items for the idle workers until ctx ends: it waits for
// one to be idle, then claims up to as many items as are idle then, in
// one call, and hands each to one of them. It returns ErrClosed, or nil
// once ctx ended.
func (q *ReliableQueue[T]) fetch(ctx context.Context, idle chan struct{}, items chan<- *Delivery[T], cfg *workerConfig) error {
	fails := 0 // takes that failed in a row
	for ctx.Err() == nil {
		select {
		case <-idle:
		case <-ctx.Done():
			return nil
		}
		n := 1
	more:
		for n < cap(idle) {
			select {
			case <-idle:
				n++
			default:
				break more
			}
		}
		ds, err := q.TakeN(ctx, n)
		// A delivery TakeN returned is handled even when ctx just ended:
		// it is in flight, and the shutdown timeout covers it.
		for _, d := range ds {
			items <- d
		}
		for range n - len(ds) {
			idle <- struct{}{}
		}
		switch {
		case errors.Is(err, ErrClosed):
			return err
		case errors.Is(err, ErrEmpty):
			continue
		case err != nil:
			cfg.report(Job{Queue: q.Name(), Key: q.Key()}, err)
			retry := backoff(fails, delay.MaxRetry)
			fails++
			select {
			case <-time.After(retry):
			case <-ctx.Done():
			}
			continue
		}
		fails = 0
	}
	return nil
}

// handle runs one attempt and returns what settles its delivery (the
// attempt's observation ends with it).
func (q *ReliableQueue[T]) handle(hctx context.Context, d *Delivery[T], handler func(context.Context, T) error, cfg *workerConfig) func() {
	job := Job{Queue: q.Name(), Key: q.Key(), ID: d.ID(), Attempt: d.Attempt(), Deadline: d.Deadline()}
	octx, obsEnd := q.q.c.start(context.WithValue(hctx, jobKey{}, job), OpProcess, q.q.def.Name)
	actx, cancel := context.WithCancelCause(q.q.c.extractItem(octx, d.d.body))
	defer cancel(nil)
	if cfg.timeout > 0 {
		var stopTimeout context.CancelFunc
		actx, stopTimeout = context.WithTimeoutCause(actx, cfg.timeout, ErrHandlerTimeout)
		defer stopTimeout()
	}
	stopExtending := q.extendWhile(d, cancel, cfg, job)

	done := make(chan error, 1)
	go func() { done <- run(actx, d.Value, handler, cfg.middleware) }()
	var err error
	select {
	case err = <-done:
	case <-actx.Done():
		// Timed out, shut down, or lost: settle now; the handler's
		// goroutine ends when it returns.
		err = context.Cause(actx)
	}
	stopExtending()
	cause := context.Cause(actx)
	return func() {
		// Settled in the attempt's observed context (its span gets the
		// acknowledgement), which ends after it.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(octx), settleTimeout)
		defer scancel()
		var serr error
		switch {
		case err == nil:
			serr = d.Ack(sctx)
		case errors.Is(cause, ErrShutdown):
			serr = d.Release(sctx)
		case errors.Is(cause, ErrDeliveryExpired):
			serr = ErrDeliveryExpired // another consumer may have it by now
		case errors.Is(err, ErrSkipRetry):
			serr = d.Bury(sctx, err)
		default:
			serr = d.Retry(sctx, err, cfg.backoff(d.Attempt(), err))
		}
		if err != nil && !errors.Is(cause, ErrShutdown) {
			cfg.report(job, err)
		}
		if serr != nil {
			cfg.report(job, serr)
		}
		obsEnd(err)
	}
}

// run calls the middleware and the handler, turning a panic into a
// PanicError.
func run[T any](ctx context.Context, v T, handler func(context.Context, T) error, mw []Middleware) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	next := func(ctx context.Context) error { return handler(ctx, v) }
	for i := len(mw) - 1; i >= 0; i-- {
		m, inner := mw[i], next
		next = func(ctx context.Context) error { return m(ctx, inner) }
	}
	return next(ctx)
}

// extendWhile extends d's visibility every third of it until the
// returned function is called; a delivery found no longer in flight
// cancels the attempt with ErrDeliveryExpired as cause.
func (q *ReliableQueue[T]) extendWhile(d *Delivery[T], cancel context.CancelCauseFunc, cfg *workerConfig, job Job) (stop func()) {
	vis := q.q.def.Visibility
	every := vis / 3
	if every <= 0 {
		return func() {}
	}
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock() // t is set before the callback reads it
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		ctx, c := context.WithTimeout(context.Background(), min(every, settleTimeout))
		err := d.Extend(ctx, vis)
		c()
		switch {
		case errors.Is(err, ErrDeliveryExpired):
			cancel(ErrDeliveryExpired)
			return
		case err != nil:
			cfg.report(job, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(every)
		}
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

func (c *workerConfig) report(j Job, err error) {
	if c.onError != nil {
		c.onError(j, err)
	}
}
