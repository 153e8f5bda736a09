package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redis/go-redis/v9"

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

// env is a test's Redis (a server of its own) and span recorder: tp
// records every span into rec.
type env struct {
	rdb *redis.Client
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

// newEnv starts t's env, shut down when t ends.
func newEnv(t *testing.T) env {
	e := env{rdb: redistest.Single(t).Client(), rec: tracetest.NewSpanRecorder()}
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.rec))
	t.Cleanup(func() { e.tp.Shutdown(context.Background()) })
	return e
}

// client returns a runtime client over e's Redis, observed by the
// adapter over e.tp with opts (traced), or by nothing; closed when t ends.
func (e env) client(t *testing.T, traced bool, opts ...lockotel.Option) *lockrt.Client {
	var c *lockrt.Client
	if traced {
		c = lockrt.New(e.rdb, lockrt.WithObserver(lockotel.New(e.tp, opts...)))
	} else {
		c = lockrt.New(e.rdb)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSpans drives the generated objects of examples/ops over a real
// Redis with the adapter installed and reads the spans back from
// OpenTelemetry's tracetest.SpanRecorder.
func TestSpans(t *testing.T) {
	e := newEnv(t)
	rec, tp := e.rec, e.tp
	rt, other := e.client(t, true), e.client(t, false)

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
	if _, err := email.OfferMany(ctx, "a@example.com", "b@example.com"); err != nil {
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

// TestTraceLinks: an Offer's span context travels inside the queue items
// to their consumers on another client: the Take span and the worker's
// Process span link to the Offer span (read back from tracetest's
// SpanRecorder; the items carry the Offer span's traceparent, byte for
// byte as expected), the handler's own spans are children of the Process
// span, and baggage carried with WithPropagator reaches the handler. An
// Offer without a span (a no-op tracer provider) stores the item in the
// version-1 envelope, byte for byte as without the adapter.
func TestTraceLinks(t *testing.T) {
	e := newEnv(t)
	rdb, rec, tp := e.rdb, e.rec, e.tp
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	producer := e.client(t, true, lockotel.WithPropagator(prop))
	consumer := e.client(t, true, lockotel.WithPropagator(prop))

	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ctx, request := tp.Tracer("test").Start(baggage.ContextWithBaggage(context.Background(), bag), "request")
	if _, err := shopops.NewQueues(producer).Email("links").OfferMany(ctx, "a@example.com", "b@example.com"); err != nil {
		t.Fatal(err)
	}
	request.End()
	// Stored: version 2, the tag, the section's length, the section (the
	// baggage and the Offer span's W3C traceparent, keys and values
	// length-prefixed; the traceparent alone adds 69 bytes to an item), the
	// JSON.
	var offerSC trace.SpanContext
	for _, s := range rec.Ended() {
		if s.Name() == "lockgen.Offer" {
			offerSC = s.SpanContext()
		}
	}
	traceparent := "00-" + offerSC.TraceID().String() + "-" + offerSC.SpanID().String() + "-01"
	stored, err := rdb.HVals(context.Background(), shopops.NewQueues(producer).Email("links").Key()+":data").Result()
	want := "\x00\x02j\x58\x07baggage\x0btenant=acme\x0btraceparent\x37" + traceparent
	if err != nil || len(stored) != 2 || stored[0] != want+`"a@example.com"` && stored[0] != want+`"b@example.com"` {
		t.Errorf("stored items %q, %v; want each %q and its JSON", stored, err, want)
	}
	email := shopops.NewQueues(consumer).Email("links")
	d, err := email.TryTake(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
	type handled struct {
		span   trace.SpanContext
		tenant string
	}
	got := make(chan handled, 1)
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- email.Serve(sctx, func(ctx context.Context, _ string) error {
			_, span := tp.Tracer("test").Start(ctx, "handler")
			span.End()
			got <- handled{span.SpanContext(), baggage.FromContext(ctx).Member("tenant").Value()}
			return nil
		})
	}()
	var h handled
	select {
	case h = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker handled nothing")
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if h.tenant != "acme" {
		t.Errorf("the handler's baggage has tenant %q; want the producer's acme", h.tenant)
	}

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	if len(byName["lockgen.Offer"]) != 1 || len(byName["lockgen.Process"]) != 1 || len(byName["handler"]) != 1 {
		t.Fatalf("spans: %d Offer, %d Process, %d handler; want one each", len(byName["lockgen.Offer"]), len(byName["lockgen.Process"]), len(byName["handler"]))
	}
	offer := byName["lockgen.Offer"][0].SpanContext()
	linked := func(s sdktrace.ReadOnlySpan) bool {
		for _, l := range s.Links() {
			if l.SpanContext.TraceID() == offer.TraceID() && l.SpanContext.SpanID() == offer.SpanID() {
				return true
			}
		}
		return false
	}
	var takes int
	for _, s := range byName["lockgen.Take"] {
		if !linked(s) {
			continue // the worker's Takes that found nothing
		}
		takes++
		if s.SpanContext().TraceID() == offer.TraceID() {
			t.Error("the Take span is in the producer's trace; want a trace of its own, linked")
		}
	}
	if takes != 2 {
		t.Errorf("%d Take spans link to the Offer span; want 2 (TryTake's and the worker's)", takes)
	}
	process := byName["lockgen.Process"][0]
	if !linked(process) {
		t.Errorf("the Process span's links %+v do not contain the Offer span %v", process.Links(), offer)
	}
	if process.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("Process span kind %v", process.SpanKind())
	}
	if hs := byName["handler"][0]; hs.Parent().SpanID() != process.SpanContext().SpanID() || !h.span.Equal(hs.SpanContext()) {
		t.Error("the handler's span is not a child of the Process span")
	}
	var acked bool
	for _, e := range process.Events() {
		acked = acked || e.Name == "lockgen.acked"
	}
	if !acked {
		t.Errorf("the Process span's events %+v do not include the acknowledgement", process.Events())
	}

	// No span, nothing carried: the stored item is the version-1 envelope.
	untraced := lockrt.New(rdb, lockrt.WithObserver(lockotel.New(noop.NewTracerProvider())))
	defer untraced.Close()
	q := shopops.NewQueues(untraced).Email("plain")
	if _, err := q.Offer(context.Background(), "c@example.com"); err != nil {
		t.Fatal(err)
	}
	vals, err := rdb.HVals(context.Background(), q.Key()+":data").Result()
	if want := "\x00\x01j\"c@example.com\""; err != nil || len(vals) != 1 || vals[0] != want {
		t.Errorf("untraced item stored as %q, %v; want %q", vals, err, want)
	}
}
