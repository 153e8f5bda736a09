// Package otel traces what lockgen's runtime does with OpenTelemetry: a
// runtime.Observer to install with runtime.WithObserver.
//
//	rt := lockrt.New(rdb, lockrt.WithObserver(lockotel.New(otel.GetTracerProvider())))
//
// Every Lock, Acquire, Allow, Offer and Take is a span named
// "lockgen.<Op>" with the object's spec name (attribute lockgen.object,
// never param values), its error, and what happened in it: the wait of
// an acquisition (lockgen.wait_seconds), a limiter's decision
// (lockgen.allowed), the items offered (lockgen.items). Offer spans are
// producer spans; Take spans and "lockgen.Process" spans (one per attempt
// of a worker's handler, ReliableQueue.Serve, which runs inside it) are
// consumer spans. Events that happen inside an operation's context (a
// script reloaded after NOSCRIPT, a release, an acknowledgement) are span
// events when that context carries a span.
//
// The Observer is a runtime.ItemPropagator: an Offer writes its span's
// context into every item it enqueues (W3C traceparent and tracestate,
// with propagation.TraceContext unless WithPropagator says otherwise),
// and the Take and the worker's attempt that consume the item link their
// spans to it (a span link, since a consumer's trace is not the
// producer's), and put the propagator's other fields (baggage) in the
// handler's context. Install it on consumers first: an older runtime
// dead-letters carrying items (see runtime.ItemPropagator). The
// traceparent adds 69 bytes to an item (with its key and the lengths),
// tracestate and baggage their own length (TestTraceLinks checks the
// stored bytes); without a span in the Offer's context nothing is carried
// and items keep their size.
//
// It is a module of its own, so that the runtime depends on go-redis
// alone.
package otel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockgen/lockgen/runtime"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/lockgen/lockgen/runtime"

// Observer is the runtime.Observer that makes the spans, and the
// runtime.ItemPropagator that carries them through queue items.
type Observer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var _ runtime.ItemPropagator = (*Observer)(nil)

// Option configures New.
type Option func(*Observer)

// WithPropagator sets what an Offer writes into queue items and what
// consumers read back (default propagation.TraceContext{}; for baggage
// too, propagation.NewCompositeTextMapPropagator(propagation.TraceContext{},
// propagation.Baggage{}), or otel.GetTextMapPropagator()).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(o *Observer) { o.prop = p }
}

// New returns an observer whose spans come from tp.
func New(tp trace.TracerProvider, opts ...Option) *Observer {
	o := &Observer{
		tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(runtime.Version)),
		prop:   propagation.TraceContext{},
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// InjectItem writes the Offer span's context (ctx) into fields, which
// every item of the Offer carries.
func (o *Observer) InjectItem(ctx context.Context, fields map[string]string) {
	o.prop.Inject(ctx, propagation.MapCarrier(fields))
}

// ExtractItem links the span of ctx (a Take's, or a worker's attempt's) to
// the producer's span carried in fields, and returns ctx with the
// baggage carried, if any.
func (o *Observer) ExtractItem(ctx context.Context, fields map[string]string) context.Context {
	pctx := o.prop.Extract(context.Background(), propagation.MapCarrier(fields))
	if sc := trace.SpanContextFromContext(pctx); sc.IsValid() {
		trace.SpanFromContext(ctx).AddLink(trace.Link{SpanContext: sc})
	}
	if carried := baggage.FromContext(pctx); carried.Len() > 0 {
		b := baggage.FromContext(ctx)
		for _, m := range carried.Members() {
			b, _ = b.SetMember(m)
		}
		ctx = baggage.ContextWithBaggage(ctx, b)
	}
	return ctx
}

// Start starts the operation's span; end ends it with the error.
func (o *Observer) Start(ctx context.Context, op runtime.Op) (context.Context, func(error)) {
	kind := trace.SpanKindInternal
	switch op.Kind {
	case runtime.OpOffer:
		kind = trace.SpanKindProducer
	case runtime.OpTake, runtime.OpProcess:
		kind = trace.SpanKindConsumer
	}
	ctx, span := o.tracer.Start(ctx, "lockgen."+string(op.Kind),
		trace.WithSpanKind(kind), trace.WithAttributes(attribute.String("lockgen.object", op.Object)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Event adds what happened to the span of ctx, if it has one.
func (o *Observer) Event(ctx context.Context, e runtime.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	switch e.Kind {
	case runtime.EventAcquired:
		span.SetAttributes(attribute.Float64("lockgen.wait_seconds", e.Duration.Seconds()))
	case runtime.EventAllowed, runtime.EventDenied:
		span.SetAttributes(attribute.Bool("lockgen.allowed", e.Kind == runtime.EventAllowed), attribute.Int("lockgen.requests", e.N))
	case runtime.EventEnqueued:
		span.SetAttributes(attribute.Int("lockgen.items", e.N))
	default:
		attrs := []attribute.KeyValue{attribute.String("lockgen.object", e.Object)}
		if e.Duration > 0 {
			attrs = append(attrs, attribute.Float64("lockgen.duration_seconds", e.Duration.Seconds()))
		}
		if e.Err != nil {
			attrs = append(attrs, attribute.String("lockgen.error", e.Err.Error()))
		}
		span.AddEvent("lockgen."+string(e.Kind), trace.WithAttributes(attrs...))
	}
}
