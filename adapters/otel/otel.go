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
// producer spans and Take spans consumer spans. Events that happen inside
// an operation's context (a script reloaded after NOSCRIPT, a release,
// an acknowledgement) are span events when that context carries a span.
//
// It is a module of its own, so that the runtime depends on go-redis
// alone.
package otel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockgen/lockgen/runtime"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/lockgen/lockgen/runtime"

// Observer is the runtime.Observer that makes the spans.
type Observer struct {
	tracer trace.Tracer
}

var _ runtime.Observer = (*Observer)(nil)

// New returns an observer whose spans come from tp.
func New(tp trace.TracerProvider) *Observer {
	return &Observer{tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(runtime.Version))}
}

// Start starts the operation's span; end ends it with the error.
func (o *Observer) Start(ctx context.Context, op runtime.Op) (context.Context, func(error)) {
	kind := trace.SpanKindInternal
	switch op.Kind {
	case runtime.OpOffer:
		kind = trace.SpanKindProducer
	case runtime.OpTake:
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
