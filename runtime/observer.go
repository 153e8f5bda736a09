package runtime

import (
	"context"
	"log/slog"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/delay"
	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// Observer is told what the runtime does, for metrics, traces and logs.
// Adapters live in modules of their own, so the runtime depends on
// go-redis alone: github.com/lockgen/lockgen/adapters/prometheus and
// github.com/lockgen/lockgen/adapters/otel. Events name objects by their
// spec name (Object), never by param values, so label sets stay small.
//
// The runtime calls an Observer inline, from the goroutine doing the work
// (the caller's, or the watchdog's): implementations must be safe for
// concurrent use and quick. Install one with WithObserver; WithLogger
// installs one that logs.
type Observer interface {
	// Start is called when an operation begins (Lock, TryLock, Acquire,
	// TryAcquire, Allow, AllowN, Wait, WaitN, Offer, OfferMany, OfferIn,
	// OfferAt, Take, TryTake, and each attempt of a worker's handler). The
	// operation continues with the context
	// Start returns (a tracer puts its span there), and calls end once,
	// with the operation's error, when it returns.
	Start(ctx context.Context, op Op) (_ context.Context, end func(error))
	// Event reports one thing that happened; ctx is the operation's
	// context from Start, or context.Background() for the watchdog's and
	// timers' own work.
	Event(ctx context.Context, e Event)
}

// Op is an operation an Observer sees start and end.
type Op struct {
	Kind   OpKind
	Object string // the object's name in the spec
}

// OpKind names an operation.
type OpKind string

// The operations observed.
const (
	OpLock    OpKind = "Lock"    // Lock, TryLock (and each side of an RWLock)
	OpAcquire OpKind = "Acquire" // a semaphore's Acquire, TryAcquire
	OpAllow   OpKind = "Allow"   // a limiter's Allow, AllowN, Wait, WaitN
	OpOffer   OpKind = "Offer"   // a queue's Offer, OfferMany, OfferIn, OfferAt
	OpTake    OpKind = "Take"    // a queue's Take, TryTake
	// OpProcess is one attempt of a worker's handler (ReliableQueue.Serve):
	// the handler runs with the context Start returns, and end gets the
	// attempt's error.
	OpProcess OpKind = "Process"
)

// ItemPropagator is an Observer that carries context inside queue items,
// from the Offer that enqueued an item to the Take and the worker's
// attempts (OpProcess) that consume it: the OpenTelemetry adapter writes
// the producer's trace context (W3C traceparent, tracestate) and links the
// consumer's span to the producer's. The runtime stores the fields as
// opaque strings in the item's envelope (version 2); an offer for which no
// propagator writes a field stores its items as it would without one, at
// no extra byte.
//
// Consumers must run a runtime that reads version 2 (this one) before
// producers install a propagator: an older runtime dead-letters such
// items with ErrEnvelope.
type ItemPropagator interface {
	Observer
	// InjectItem is called once per Offer, OfferMany, OfferIn or OfferAt
	// with the context Start returned for it, and writes into fields what
	// every item of that offer carries.
	InjectItem(ctx context.Context, fields map[string]string)
	// ExtractItem is called when a Take or a worker's attempt got an item
	// that carries fields, with the context Start returned for that
	// operation. It returns the context the operation goes on with (a
	// worker's handler runs with it; a Take's is only ended).
	ExtractItem(ctx context.Context, fields map[string]string) context.Context
}

// EventKind names an event.
type EventKind string

// The events, and what Event's fields mean for each.
const (
	// EventAcquired: a lock or permits were taken; Duration is the wait.
	EventAcquired EventKind = "acquired"
	// EventReleased: a lease or permit was given up; Duration is how long
	// it was held.
	EventReleased EventKind = "released"
	// EventLeaseLost: a hold ended without its holder giving it up; Err
	// is the cause (ErrLockLost, ErrPermitLost).
	EventLeaseLost EventKind = "lease-lost"
	// EventRenewed: the watchdog extended a hold.
	EventRenewed EventKind = "renewed"
	// EventRenewFailed: a renewal could not reach Redis; Err says why
	// (the watchdog retries until the lease would run out).
	EventRenewFailed EventKind = "renew-failed"
	// EventScriptReloaded: Redis did not know a script (NOSCRIPT: a
	// restart, failover or SCRIPT FLUSH) and it was sent again; Object is
	// the script's name.
	EventScriptReloaded EventKind = "script-reloaded"
	// EventEnqueued: N items were offered to a queue.
	EventEnqueued EventKind = "enqueued"
	// EventDelivered: an item was taken from a queue.
	EventDelivered EventKind = "delivered"
	// EventAcked, EventNacked: a delivery was acknowledged, or given
	// back (Err: the reason).
	EventAcked  EventKind = "acked"
	EventNacked EventKind = "nacked"
	// EventDue: the delay timer made a delayed item ready to take (an
	// OfferIn, OfferAt, or a Retry with a backoff); Duration is how late:
	// when it was moved minus when it was due, both on the Redis server's
	// clock. Reported by the client whose timer moved it, with
	// context.Background().
	EventDue EventKind = "due"
	// EventDead: an item went to the dead-letter list (Err: the reason).
	EventDead EventKind = "dead"
	// EventTimerRetry: a run of the delay timer's move failed (Redis
	// unreachable, a failover); Key is the queue's key, Duration the wait
	// before it is tried again, Err the cause.
	EventTimerRetry EventKind = "timer-retry"
	// EventPubSubLost: a pub/sub connection failed (an outage, CLIENT
	// KILL, a failover); its N channels are subscribed again, on a new
	// connection or, on a cluster, on their slots' primaries. Key is the
	// server's address on a cluster (sharded pub/sub), else empty; Err is
	// the cause. Reported once per failure, not per reconnection attempt.
	EventPubSubLost EventKind = "pubsub-lost"
	// EventResubscribed: one channel of a failed pub/sub connection (Key)
	// is being subscribed again; its waiters are woken once it is.
	EventResubscribed EventKind = "resubscribed"
	// EventWaitFallback: a wait ended by its fallback timer, not by a
	// wake-up message: the attempt its timer made took the lock or the
	// permits. A release hands a lock to its waiter and tells it, so this
	// means the holder's lease ran out unreleased (a crashed or paused
	// holder, a release that never reached Redis), a wake-up was lost (a
	// pub/sub connection down), or Redis was unreachable and the wait's
	// retries found it back. Object and Key are the lock's (a
	// multi-lock's: the lock it waited on), Duration the wait. Locks,
	// multi-locks and semaphores report it; a RedLock does not (its
	// waiters also use the timer for a grace after the first node's
	// wake-up and for the pause after a split). Rare and cheap: it costs
	// nothing on the message path.
	EventWaitFallback EventKind = "wait-fallback"
	// EventAllowed, EventDenied: a limiter allowed or denied N requests.
	EventAllowed EventKind = "allowed"
	EventDenied  EventKind = "denied"
	// EventFired: this client fired a schedule's tick (Object: the
	// schedule); Duration is how late, by the server's clock.
	EventFired EventKind = "fired"
	// EventFireFailed: a schedule's claim could not reach Redis, its
	// handler or build function failed, or its item was too large; Err
	// says which.
	EventFireFailed EventKind = "fire-failed"
)

// Event is one thing that happened to an object.
type Event struct {
	Kind     EventKind
	Object   string
	Duration time.Duration
	N        int
	Err      error
	// Key is the Redis key or pub/sub channel concerned, for logs (set for
	// EventTimerRetry, EventPubSubLost, EventResubscribed). It holds param
	// values: never make it a metric label.
	Key string
}

// WithObserver adds an observer; several are called in the order given.
func WithObserver(o Observer) Option {
	return func(c *Client) {
		if o != nil {
			c.observers = append(c.observers, o)
		}
		if p, ok := o.(ItemPropagator); ok {
			c.propagators = append(c.propagators, p)
		}
	}
}

// WithLogger logs, with l, what an operator wants to hear of: lost
// leases, failed renewals, failed runs of the delay timer (with the
// queue's object and key), failed schedule ticks and failed pub/sub
// connections (with the number of channels subscribed again) at Warn; scripts sent again after
// NOSCRIPT at Info; and each channel subscribed again at Debug.
func WithLogger(l *slog.Logger) Option { return WithObserver(logObserver{l}) }

// start begins an observed operation; end reports its error.
func (c *Client) start(ctx context.Context, kind OpKind, object string) (context.Context, func(error)) {
	switch len(c.observers) {
	case 0:
		return ctx, func(error) {}
	case 1:
		return c.observers[0].Start(ctx, Op{Kind: kind, Object: object})
	}
	ends := make([]func(error), len(c.observers))
	for i, o := range c.observers {
		ctx, ends[i] = o.Start(ctx, Op{Kind: kind, Object: object})
	}
	return ctx, func(err error) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](err)
		}
	}
}

// injectItems puts what the propagators write for an offer under ctx into
// each body (in its envelope); without a propagator or with nothing
// written, the bodies are left as they are.
func (c *Client) injectItems(ctx context.Context, bodies [][]byte) {
	if len(c.propagators) == 0 {
		return
	}
	fields := map[string]string{}
	for _, p := range c.propagators {
		p.InjectItem(ctx, fields)
	}
	if len(fields) == 0 {
		return
	}
	carrier := encodeCarrier(fields)
	for i, b := range bodies {
		if len(b) >= envelopeHeader && b[0] == envelopeMark && b[1] == envelopeVersion {
			bodies[i] = withCarrier(b, carrier)
		}
	}
}

// extractItem hands the fields an item carries (a body that decoded) to
// the propagators, and returns the context they return.
func (c *Client) extractItem(ctx context.Context, body []byte) context.Context {
	if len(c.propagators) == 0 || len(body) < envelopeHeader || body[0] != envelopeMark || body[1] != envelopeCarrier {
		return ctx
	}
	section, _, err := splitItem(body)
	if err != nil {
		return ctx
	}
	fields, err := decodeCarrier(section)
	if err != nil || len(fields) == 0 {
		return ctx
	}
	for _, p := range c.propagators {
		ctx = p.ExtractItem(ctx, fields)
	}
	return ctx
}

// acquired ends an observed acquisition that began at start, reporting
// EventAcquired with the wait when it succeeded.
func (c *Client) acquired(ctx context.Context, end func(error), object string, start time.Time, err error) {
	if err == nil {
		c.observe(ctx, Event{Kind: EventAcquired, Object: object, Duration: time.Since(start)})
	}
	end(err)
}

// observeDecision reports a limiter's decision about n > 0 requests.
func (c *Client) observeDecision(ctx context.Context, object string, n int, code int64, err error) {
	switch {
	case err != nil || n == 0:
	case code == denied:
		c.observe(ctx, Event{Kind: EventDenied, Object: object, N: n})
	default:
		c.observe(ctx, Event{Kind: EventAllowed, Object: object, N: n})
	}
}

// observeOffer ends an observed Offer of n items.
func (c *Client) observeOffer(ctx context.Context, end func(error), object string, n int, err error) {
	if err == nil && n > 0 {
		c.observe(ctx, Event{Kind: EventEnqueued, Object: object, N: n})
	}
	end(err)
}

// observeTake ends an observed Take that took n items (one event each).
func (c *Client) observeTake(ctx context.Context, end func(error), object string, n int, err error) {
	if err == nil {
		for range n {
			c.observe(ctx, Event{Kind: EventDelivered, Object: object})
		}
	}
	end(err)
}

// settled is the event of a nack script's reply: 2 dead-lettered, else
// queued again.
func settled(code int) EventKind {
	if code == 2 {
		return EventDead
	}
	return EventNacked
}

// observeRenewal reports one renewal's outcome; a lost hold is reported
// by observeLost.
func (c *Client) observeRenewal(ctx context.Context, object string, o watchdog.Outcome, err error) {
	switch o {
	case watchdog.Renewed:
		c.observe(ctx, Event{Kind: EventRenewed, Object: object})
	case watchdog.Again:
		c.observe(ctx, Event{Kind: EventRenewFailed, Object: object, Err: err})
	}
}

// observePubSubLost reports a failed pub/sub connection and the channels
// it subscribes again.
func (c *Client) observePubSubLost(addr string, chans []string, cause error) {
	ctx := context.Background()
	c.observe(ctx, Event{Kind: EventPubSubLost, Key: addr, N: len(chans), Err: cause})
	for _, ch := range chans {
		c.observe(ctx, Event{Kind: EventResubscribed, Key: ch})
	}
}

// observeTimerRetry reports a failed move of the delay timer, and when it
// is tried again.
func (c *Client) observeTimerRetry(q delay.Queue, retry time.Duration, err error) {
	c.observe(context.Background(), Event{Kind: EventTimerRetry, Object: q.Name(), Key: q.Key(), Duration: retry, Err: err})
}

// observeLost reports a hold the watchdog gave up with cause (not when
// the client was closed).
func (c *Client) observeLost(object string, cause error) {
	c.observe(context.Background(), Event{Kind: EventLeaseLost, Object: object, Err: cause})
}

// observe reports an event to every observer.
func (c *Client) observe(ctx context.Context, e Event) {
	for _, o := range c.observers {
		o.Event(ctx, e)
	}
}

// logObserver is WithLogger's observer.
type logObserver struct{ l *slog.Logger }

func (logObserver) Start(ctx context.Context, _ Op) (context.Context, func(error)) {
	return ctx, func(error) {}
}

func (o logObserver) Event(ctx context.Context, e Event) {
	switch e.Kind {
	case EventLeaseLost:
		o.l.WarnContext(ctx, "lockgen: lease lost", "object", e.Object, "cause", e.Err)
	case EventRenewFailed:
		o.l.WarnContext(ctx, "lockgen: renewal failed; retrying until the lease runs out", "object", e.Object, "err", e.Err)
	case EventScriptReloaded:
		o.l.InfoContext(ctx, "lockgen: script reloaded after NOSCRIPT", "script", e.Object)
	case EventTimerRetry:
		o.l.WarnContext(ctx, "lockgen: delay timer's move failed; retrying", "object", e.Object, "key", e.Key, "retry", e.Duration, "err", e.Err)
	case EventPubSubLost:
		args := []any{"channels", e.N, "err", e.Err}
		if e.Key != "" {
			args = append(args, "addr", e.Key)
		}
		o.l.WarnContext(ctx, "lockgen: pub/sub connection lost; subscribing its channels again", args...)
	case EventResubscribed:
		o.l.DebugContext(ctx, "lockgen: subscribing again", "channel", e.Key)
	case EventFireFailed:
		o.l.WarnContext(ctx, "lockgen: a schedule's tick failed (its claim, handler or build)", "object", e.Object, "key", e.Key, "err", e.Err)
	case EventWaitFallback:
		o.l.InfoContext(ctx, "lockgen: a wait ended by its fallback timer, not a wake-up (a holder's lease ran out unreleased, a lost wake-up, or Redis back after an outage)", "object", e.Object, "key", e.Key, "wait", e.Duration)
	}
}
