package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	lockotel "github.com/lockgen/lockgen/adapters/otel"
	"github.com/lockgen/lockgen/examples/ops/shopops"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestSpans drives the generated objects of examples/ops over a real
// Redis with the adapter installed and reads the spans back from
// OpenTelemetry's tracetest.SpanRecorder.
func TestSpans(t *testing.T) {
	rdb := redistest.Single(t).Client()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	rt := lockrt.New(rdb, lockrt.WithObserver(lockotel.New(tp)))
	defer rt.Close()
	other := lockrt.New(rdb)
	defer other.Close()

	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	held, err := shopops.NewLocks(other).Order(1).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(150*time.Millisecond, func() { held.Unlock(context.Background()) })
	le, err := shopops.NewLocks(rt).Order(1).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	le.Unlock(ctx)
	if _, err := shopops.NewLocks(rt).Order(2).TryLock(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := shopops.NewLocks(rt).Order(2).TryLock(context.Background(), 0); !errors.Is(err, lockrt.ErrNotObtained) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	p, err := shopops.NewSemaphores(rt).Export("acme").Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(ctx)
	if _, err := shopops.NewLimiters(rt).API("u").Allow(ctx); err != nil {
		t.Fatal(err)
	}
	email := shopops.NewQueues(rt).Email("acme")
	if err := email.OfferMany(ctx, "a@example.com", "b@example.com"); err != nil {
		t.Fatal(err)
	}
	d, err := email.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.Ack(ctx)
	parent.End()

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	for name, n := range map[string]int{"lockgen.Lock": 3, "lockgen.Acquire": 1, "lockgen.Allow": 1, "lockgen.Offer": 1, "lockgen.Take": 1} {
		if len(byName[name]) != n {
			t.Errorf("%d %s spans, want %d", len(byName[name]), name, n)
		}
	}
	pid := parent.SpanContext().SpanID()
	for _, s := range rec.Ended() {
		if s.Name() == "request" {
			continue
		}
		if v, _ := attr(s, "lockgen.object"); v.AsString() == "" {
			t.Errorf("%s has no lockgen.object", s.Name())
		}
		if s.Name() != "lockgen.Lock" || s.Status().Code != codes.Error {
			if s.Parent().SpanID() != pid {
				t.Errorf("%s is not a child of the caller's span", s.Name())
			}
		}
	}
	lock := byName["lockgen.Lock"][0]
	if w, ok := attr(lock, "lockgen.wait_seconds"); !ok || w.AsFloat64() < 0.1 {
		t.Errorf("the waiting Lock span has wait %v (%v), want about 0.15s", w.AsFloat64(), ok)
	}
	var failed int
	for _, s := range byName["lockgen.Lock"] {
		if s.Status().Code == codes.Error {
			failed++
			if len(s.Events()) == 0 || s.Events()[0].Name != "exception" {
				t.Errorf("the failed Lock span records no error: %+v", s.Events())
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d failed Lock spans, want 1", failed)
	}
	if a, _ := attr(byName["lockgen.Allow"][0], "lockgen.allowed"); !a.AsBool() {
		t.Error("the Allow span does not say it was allowed")
	}
	if n, _ := attr(byName["lockgen.Offer"][0], "lockgen.items"); n.AsInt64() != 2 {
		t.Errorf("the Offer span says %d items, want 2", n.AsInt64())
	}
	if k := byName["lockgen.Offer"][0].SpanKind(); k != trace.SpanKindProducer {
		t.Errorf("Offer span kind %v", k)
	}
	if k := byName["lockgen.Take"][0].SpanKind(); k != trace.SpanKindConsumer {
		t.Errorf("Take span kind %v", k)
	}
}
