package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/delay"
)

// Serving several queues with one pool of workers: a Mux.

// Mux runs handlers on the items of several queues with one pool of
// worker goroutines, as asynq's Queues map does: by default weighted
// fair (a queue of weight 6 gets six items handled for a queue of weight
// 3's three, while both have items ready; an empty queue's share goes to
// the others), or by strict priority (StrictPriority: a queue is served
// only while every queue of a higher weight is empty). Register the
// queues with Handle, then call Serve:
//
//	m := lockrt.NewMux()
//	lockrt.Handle(m, queues.Critical(), 6, sendAlert)
//	lockrt.Handle(m, queues.Default(), 3, sendEmail)
//	lockrt.Handle(m, queues.Low(), 1, rebuildIndex)
//	err := m.Serve(ctx, lockrt.WithConcurrency(10))
//
// Each worker takes its next item from the queue the weights choose
// (smooth weighted round robin, so the shares hold over every few items,
// not only on average), trying the next queue when that one has nothing
// ready: one round trip per queue tried. When every queue is empty the
// worker waits on all of them at once (a waiting Take per queue, holding
// no pool connection), and takes from whichever has an item first.
//
// Items of reliable queues are handled as ReliableQueue.Serve handles
// them (acknowledged, retried with backoff, dead-lettered); items of plain
// queues at most once, as Queue.Serve. A paused queue (Pause) is passed
// over until it is resumed.
//
// A Mux is not safe for registering while it serves; Serve may run once
// at a time.
type Mux struct {
	strict  bool
	entries []*muxEntry
	errs    []error

	mu     sync.Mutex
	parked []muxJob // items taken by a wait on every queue and not handled yet
}

// MuxOption configures NewMux.
type MuxOption func(*Mux)

// StrictPriority makes a Mux serve its queues by strict priority: the
// queue of the highest weight while it has items, then the next one.
// Queues of the same weight share by their weights' fairness (equally).
func StrictPriority() MuxOption { return func(m *Mux) { m.strict = true } }

// NewMux returns a Mux without queues, weighted fair unless
// StrictPriority is given.
func NewMux(opts ...MuxOption) *Mux {
	m := &Mux{}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Servable is a queue a Mux can serve: *Queue[T], *DelayedQueue[T],
// *ReliableQueue[T] and *DelayedReliableQueue[T] (generated code's queue
// types). Its method is the runtime's own.
type Servable[T any] interface {
	muxSource(handler func(ctx context.Context, item T) error) muxSource
}

// Handle registers handler for the items of q, with weight (1 or more):
// its share of the workers under weighted fairness, or its priority under
// StrictPriority. A nil handler, a weight below 1 or a queue registered
// twice makes Serve return ErrInvalidArgument.
func Handle[T any](m *Mux, q Servable[T], weight int, handler func(ctx context.Context, item T) error) {
	switch {
	case q == nil || handler == nil:
		m.errs = append(m.errs, fmt.Errorf("%w: Handle with a nil queue or handler", ErrInvalidArgument))
		return
	case weight < 1:
		m.errs = append(m.errs, fmt.Errorf("%w: weight %d", ErrInvalidArgument, weight))
		return
	}
	src := sourceOf(q, handler)
	if src == nil {
		m.errs = append(m.errs, fmt.Errorf("%w: Handle with a nil queue", ErrInvalidArgument))
		return
	}
	for _, e := range m.entries {
		if e.src.queue() == src.queue() || e.src.queue().key == src.queue().key {
			m.errs = append(m.errs, fmt.Errorf("%w: queue %s registered twice", ErrInvalidArgument, src.queue().key))
			return
		}
	}
	m.entries = append(m.entries, &muxEntry{src: src, weight: weight, index: len(m.entries)})
}

// muxEntry is one queue of a Mux, with its smooth weighted round robin
// credit.
type muxEntry struct {
	src     muxSource
	weight  int
	index   int
	current int // credit, under Mux.mu
}

// muxSource is a queue with its handler.
type muxSource interface {
	queue() *queue
	// take takes one item, waiting up to wait (0: not at all; < 0: as
	// long as ctx allows): ErrEmpty when there is none.
	take(ctx context.Context, wait time.Duration) (muxJob, error)
}

// muxJob is an item taken for a handler.
type muxJob interface {
	// run runs the handler and settles the item.
	run(hctx context.Context, cfg *workerConfig)
	// giveBack puts an item taken and not handled back, unharmed (a
	// worker that shut down first).
	giveBack()
}

// Serve runs the handlers on the queues' items until ctx ends, then shuts
// down gracefully as ReliableQueue.Serve does: it takes nothing more, lets
// the running handlers finish within the shutdown timeout, and puts back
// unharmed the items it took and did not handle. The options are
// ReliableQueue.Serve's; WithConcurrency is the number of workers over
// all the queues.
//
// Serve returns nil after a graceful shutdown, ErrClosed when a queue's
// client was closed, or ErrInvalidArgument for a bad option or
// registration, or a Mux without queues.
func (m *Mux) Serve(ctx context.Context, opts ...WorkerOption) error {
	cfg, err := workerOptions(opts)
	switch {
	case err != nil:
		return err
	case len(m.errs) > 0:
		return errors.Join(m.errs...)
	case len(m.entries) == 0:
		return fmt.Errorf("%w: a Mux without queues", ErrInvalidArgument)
	}
	for _, e := range m.entries {
		if err := e.src.queue().c.checkOpen(); err != nil {
			return err
		}
	}
	hctx, stop := shutdownContext(ctx, cfg.shutdown)
	defer stop(nil)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.concurrency)
	for range cfg.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- m.work(ctx, hctx, &cfg)
		}()
	}
	wg.Wait()
	close(errs)
	m.mu.Lock()
	parked := m.parked
	m.parked = nil
	m.mu.Unlock()
	for _, j := range parked {
		j.giveBack()
	}
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// workerOptions applies opts to the defaults and checks them.
func workerOptions(opts []WorkerOption) (workerConfig, error) {
	cfg := workerConfig{concurrency: 1, shutdown: 30 * time.Second, backoff: ExponentialBackoff(time.Second, 10*time.Minute)}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.concurrency < 1:
		return cfg, fmt.Errorf("%w: concurrency %d", ErrInvalidArgument, cfg.concurrency)
	case cfg.timeout < 0, cfg.shutdown < 0:
		return cfg, fmt.Errorf("%w: negative timeout", ErrInvalidArgument)
	case cfg.backoff == nil:
		return cfg, fmt.Errorf("%w: nil backoff", ErrInvalidArgument)
	}
	return cfg, nil
}

// shutdownContext returns the context handlers run under: ctx's values,
// not its cancellation, until shutdown after ctx ends (then cancelled with
// ErrShutdown as cause).
func shutdownContext(ctx context.Context, shutdown time.Duration) (context.Context, context.CancelCauseFunc) {
	hctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
		case <-hctx.Done():
			return
		}
		t := time.NewTimer(shutdown)
		defer t.Stop()
		select {
		case <-t.C:
			stop(ErrShutdown)
		case <-hctx.Done():
		}
	}()
	return hctx, stop
}

// work is one worker goroutine: take, handle, until ctx ends.
func (m *Mux) work(ctx, hctx context.Context, cfg *workerConfig) error {
	fails := 0 // waits that failed in a row
	for ctx.Err() == nil {
		j, err := m.next(ctx, cfg)
		switch {
		case errors.Is(err, ErrClosed):
			return err
		case err != nil:
			retry := backoff(fails, delay.MaxRetry)
			fails++
			select {
			case <-time.After(retry):
			case <-ctx.Done():
			}
			continue
		case j == nil:
			continue
		}
		fails = 0
		j.run(hctx, cfg)
	}
	return nil
}

// next returns the next item to handle: a parked one first, then one of
// the queue the weights choose, trying the others in turn; when every
// queue is empty, the first item any of them has, waiting for it. It
// returns nil when ctx ended first, ErrClosed, or the error of a wait
// that failed on every queue (after reporting it).
func (m *Mux) next(ctx context.Context, cfg *workerConfig) (muxJob, error) {
	m.mu.Lock()
	if n := len(m.parked); n > 0 {
		j := m.parked[0]
		m.parked = m.parked[1:]
		m.mu.Unlock()
		return j, nil
	}
	order := m.order()
	m.mu.Unlock()
	if len(order) > 1 {
		var empty []*muxEntry
		for _, e := range order {
			j, err := e.src.take(ctx, 0)
			switch {
			case err == nil:
				m.served(e, empty)
				return j, nil
			case errors.Is(err, ErrClosed):
				return nil, err
			case !errors.Is(err, ErrEmpty):
				cfg.report(Job{Queue: e.src.queue().def.Name, Key: e.src.queue().key}, err)
			}
			empty = append(empty, e)
		}
	}
	return m.waitAny(ctx, cfg, order)
}

// order returns the entries in the order a worker tries them: by strict
// priority (weight, then registration), or by smooth weighted round
// robin credit (the one whose credit plus weight is highest first). The
// caller holds m.mu.
func (m *Mux) order() []*muxEntry {
	order := slices.Clone(m.entries)
	slices.SortStableFunc(order, func(a, b *muxEntry) int {
		if m.strict && a.weight != b.weight {
			return b.weight - a.weight
		}
		return (b.current + b.weight) - (a.current + a.weight)
	})
	return order
}

// served charges e for an item it gave, in smooth weighted round robin:
// every entry gains its weight as credit and e pays the total. Entries
// found empty on the way lose their credit, so that a queue that was
// empty does not come back with a burst. (Under StrictPriority credit
// only orders queues of one weight.)
func (m *Mux) served(e *muxEntry, empty []*muxEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	total := 0
	for _, o := range m.entries {
		if slices.Contains(empty, o) {
			o.current = 0
			continue
		}
		o.current += o.weight
		total += o.weight
	}
	e.current -= total
}

// waitAny waits on every queue at once (a waiting Take each) until one
// takes an item, then ends the others' waits. Items taken by more than
// one are parked for the next workers. It returns nil when ctx ended
// first.
func (m *Mux) waitAny(ctx context.Context, cfg *workerConfig, order []*muxEntry) (muxJob, error) {
	if len(order) == 1 {
		j, err := order[0].src.take(ctx, -1)
		return m.waited(ctx, cfg, order[0], j, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		e   *muxEntry
		j   muxJob
		err error
	}
	results := make(chan result, len(order))
	for _, e := range order {
		go func() {
			j, err := e.src.take(wctx, -1)
			results <- result{e, j, err}
		}()
	}
	var first muxJob
	var firstErr error
	for range order {
		r := <-results
		j, err := m.waited(ctx, cfg, r.e, r.j, r.err)
		switch {
		case j != nil && first == nil:
			first = j
			cancel()
		case j != nil:
			m.mu.Lock()
			m.parked = append(m.parked, j)
			m.mu.Unlock()
		case err != nil && firstErr == nil:
			firstErr = err
		}
		if first == nil && firstErr != nil {
			cancel() // one queue cannot be waited on: retry all after a backoff
		}
	}
	if first != nil {
		return first, nil
	}
	return nil, firstErr
}

// waited sorts the result of e's waiting take: its item, or nil for an
// empty-handed one, or the error to back off on (reported).
func (m *Mux) waited(ctx context.Context, cfg *workerConfig, e *muxEntry, j muxJob, err error) (muxJob, error) {
	switch {
	case err == nil:
		return j, nil
	case errors.Is(err, ErrClosed):
		return nil, err
	case errors.Is(err, ErrEmpty):
		return nil, nil
	}
	cfg.report(Job{Queue: e.src.queue().def.Name, Key: e.src.queue().key}, err)
	return nil, err
}

// sourceOf returns q's source for handler, or nil when q is a typed nil
// (a nil *Queue[T], or a *DelayedQueue[T] that is nil or holds none),
// which the interface's nil check does not see.
func sourceOf[T any](q Servable[T], handler func(context.Context, T) error) (src muxSource) {
	defer func() {
		if recover() != nil { // a nil pointer met on the way
			src = nil
		}
	}()
	src = q.muxSource(handler)
	if src.queue() == nil {
		return nil
	}
	return src
}

// The reliable queues' source: deliveries handled as ReliableQueue.Serve
// handles them.

func (q *ReliableQueue[T]) muxSource(handler func(context.Context, T) error) muxSource {
	return &reliableSource[T]{q: q, handler: handler}
}

type reliableSource[T any] struct {
	q       *ReliableQueue[T]
	handler func(context.Context, T) error
}

func (s *reliableSource[T]) queue() *queue { return s.q.q }

func (s *reliableSource[T]) take(ctx context.Context, wait time.Duration) (muxJob, error) {
	var ds []*Delivery[T]
	var err error
	if wait < 0 {
		ds, err = s.q.take(ctx, -1, 1)
	} else {
		ds, err = s.q.take(ctx, wait, 1)
	}
	if err != nil {
		return nil, err
	}
	return &reliableJob[T]{s: s, d: ds[0]}, nil
}

type reliableJob[T any] struct {
	s *reliableSource[T]
	d *Delivery[T]
}

func (j *reliableJob[T]) run(hctx context.Context, cfg *workerConfig) {
	j.s.q.handle(hctx, j.d, j.s.handler, cfg)() // settled before the worker takes again
}

func (j *reliableJob[T]) giveBack() {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	_ = j.d.Release(ctx) // else it comes back when its visibility runs out
}

// The plain queues' source: items handled at most once.

func (q *Queue[T]) muxSource(handler func(context.Context, T) error) muxSource {
	return &plainSource[T]{q: q, handler: handler}
}

type plainSource[T any] struct {
	q       *Queue[T]
	handler func(context.Context, T) error
}

func (s *plainSource[T]) queue() *queue { return s.q.q }

func (s *plainSource[T]) take(ctx context.Context, wait time.Duration) (muxJob, error) {
	v, body, err := s.q.takeBody(ctx, wait)
	if err != nil {
		return nil, err
	}
	return &plainJob[T]{s: s, v: v, body: body}, nil
}

// takeBody is Take (wait < 0) or TryTake, returning the item's body too.
func (q *Queue[T]) takeBody(ctx context.Context, wait time.Duration) (_ T, _ []byte, err error) {
	ctx, obsEnd := q.q.c.start(ctx, OpTake, q.q.def.Name)
	n := 0
	defer func() { q.q.c.observeTake(ctx, obsEnd, q.q.def.Name, n, err) }()
	var zero T
	defer q.q.done(q.q.serve(true))
	end := waitEnd(ctx, wait)
	for {
		if ctx.Err() != nil {
			return zero, nil, emptyError(ctx)
		}
		body, err := q.q.pop(ctx, end, wait == 0)
		if err != nil {
			return zero, nil, err
		}
		v, err := decodeItem(q.codec, body)
		if err == nil {
			n = 1
			return v, body, nil
		}
		if err := q.q.bury(ctx, body, err); err != nil {
			return zero, nil, err
		}
	}
}

type plainJob[T any] struct {
	s    *plainSource[T]
	v    T
	body []byte
}

func (j *plainJob[T]) run(hctx context.Context, cfg *workerConfig) {
	j.s.q.handle(hctx, j.v, j.body, j.s.handler, cfg)
}

func (j *plainJob[T]) giveBack() { j.s.q.q.giveBack([]any{"", string(j.body)}) }

// handle runs one attempt on a plain queue's item: at most once, so a
// failure (an error, a panic, a timeout) is reported and the item is gone.
func (q *Queue[T]) handle(hctx context.Context, v T, body []byte, handler func(context.Context, T) error, cfg *workerConfig) {
	job := Job{Queue: q.Name(), Key: q.Key(), Attempt: 1}
	octx, obsEnd := q.q.c.start(context.WithValue(hctx, jobKey{}, job), OpProcess, q.q.def.Name)
	actx, cancel := context.WithCancelCause(q.q.c.extractItem(octx, body))
	defer cancel(nil)
	if cfg.timeout > 0 {
		var stopTimeout context.CancelFunc
		actx, stopTimeout = context.WithTimeoutCause(actx, cfg.timeout, ErrHandlerTimeout)
		defer stopTimeout()
	}
	done := make(chan error, 1)
	go func() { done <- run(actx, v, handler, cfg.middleware) }()
	var err error
	select {
	case err = <-done:
	case <-actx.Done():
		err = context.Cause(actx)
	}
	if err != nil {
		cfg.report(job, err)
	}
	obsEnd(err)
}

// Serve runs handler on the queue's items until ctx ends, then shuts down
// gracefully: it takes nothing more and lets the running handlers finish
// within the shutdown timeout (then their contexts are cancelled with
// ErrShutdown as cause). A plain queue is at most once: an item is gone
// from Redis once taken, so an item whose handler fails, panics, times
// out or is cut short by the shutdown timeout is not retried (the error
// goes to WithErrorHandler), and an item whose process dies while
// handling it is lost. Use a reliable queue for
// at-least-once handling with retries. Items that do not decode go to
// the dead letters without reaching the handler.
//
// The options are ReliableQueue.Serve's (WithBackoff is not used). Serve
// returns nil after a graceful shutdown, ErrClosed when the client was
// closed, or ErrInvalidArgument for a bad option.
func (q *Queue[T]) Serve(ctx context.Context, handler func(ctx context.Context, item T) error, opts ...WorkerOption) error {
	m := NewMux()
	Handle(m, q, 1, handler)
	return m.Serve(ctx, opts...)
}
