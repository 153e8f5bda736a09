package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

type traceKey struct{}

// propagator is an ItemPropagator that carries the caller's traceKey
// value in a field "trace" and records what consumers extract.
type propagator struct {
	mu  sync.Mutex
	got []string // "<op> <trace>", per extraction
}

func (p *propagator) Start(ctx context.Context, op lockrt.Op) (context.Context, func(error)) {
	return context.WithValue(ctx, spanKey{}, string(op.Kind)), func(error) {}
}

func (p *propagator) Event(context.Context, lockrt.Event) {}

func (p *propagator) InjectItem(ctx context.Context, fields map[string]string) {
	if v, ok := ctx.Value(traceKey{}).(string); ok {
		fields["trace"] = v
		fields["op"], _ = ctx.Value(spanKey{}).(string)
	}
}

func (p *propagator) ExtractItem(ctx context.Context, fields map[string]string) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	op, _ := ctx.Value(spanKey{}).(string)
	p.got = append(p.got, fmt.Sprintf("%s %s from %s", op, fields["trace"], fields["op"]))
	return context.WithValue(ctx, traceKey{}, fields["trace"])
}

func (p *propagator) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.got
	p.got = nil
	return got
}

// TestItemCarrier: what an ItemPropagator writes at an Offer (under the
// Offer's observed context) travels in the item's envelope (version 2)
// through a plain, a delayed and a reliable queue to the Take and the
// worker's attempt that consume it, whose propagator gets it in their own
// observed contexts; a worker's handler runs with the context it returns.
// An item offered with nothing to carry is stored byte for byte as
// without a propagator (version 1), and a client without a propagator
// takes carrying items as any other.
func TestItemCarrier(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 30*time.Second)
	b := backends()[0]
	prodProp, consProp := &propagator{}, &propagator{}
	newC := func(opts ...lockrt.Option) *lockrt.Client {
		rdb := b.new()
		c := lockrt.New(rdb, opts...)
		t.Cleanup(func() { c.Close(); rdb.Close() })
		return c
	}
	producer := newC(lockrt.WithObserver(prodProp))
	consumer := newC(lockrt.WithObserver(consProp))
	plainC := newC()
	traced := context.WithValue(ctx, traceKey{}, "t-1")
	codec := lockrt.JSON[item]{}
	js, _ := json.Marshal(item{1, 2})

	// Plain queue: the stored bytes, then what the consumer extracts.
	d := queueDef(t, false, 0, 0)
	k := key(t, "plain")
	pq := lockrt.NewQueue(producer, d, codec, k)
	if err := pq.Offer(ctx, item{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := pq.OfferMany(traced, item{1, 2}, item{1, 2}); err != nil {
		t.Fatal(err)
	}
	raw, err := producer.Redis().LRange(ctx, k, 0, -1).Result()
	if err != nil || len(raw) != 3 {
		t.Fatalf("stored items: %q, %v", raw, err)
	}
	if want := "\x00\x01j" + string(js); raw[0] != want {
		t.Errorf("untraced item stored as %q; want %q (version 1, no extra byte)", raw[0], want)
	}
	// Fields in key order: op=Offer, trace=t-1, each length-prefixed.
	section := "\x02op\x05Offer\x05trace\x03t-1"
	if want := "\x00\x02j" + string(rune(len(section))) + section + string(js); raw[1] != want || raw[2] != want {
		t.Errorf("traced items stored as %q, %q; want %q", raw[1], raw[2], want)
	}
	cq := lockrt.NewQueue(consumer, d, codec, k)
	for range 2 {
		if v, err := cq.TryTake(ctx, time.Second); err != nil || v != (item{1, 2}) {
			t.Fatalf("take: %v, %v", v, err)
		}
	}
	if got := consProp.take(); len(got) != 1 || got[0] != "Take t-1 from Offer" {
		t.Errorf("extracted %q; want one, from the traced item, in the Take's context", got)
	}
	if v, err := lockrt.NewQueue(plainC, d, codec, k).TryTake(ctx, time.Second); err != nil || v != (item{1, 2}) {
		t.Errorf("a client without a propagator took %v, %v", v, err)
	}

	// Delayed queue: the carrier survives the delay scheduler's move.
	dd, dk := queueDef(t, true, 0, 0), key(t, "delayed")
	if err := lockrt.NewDelayedQueue(producer, dd, codec, dk).OfferIn(traced, item{3, 4}, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if v, err := lockrt.NewDelayedQueue(consumer, dd, codec, dk).TryTake(ctx, 10*time.Second); err != nil || v != (item{3, 4}) {
		t.Fatalf("delayed take: %v, %v", v, err)
	}
	if got := consProp.take(); len(got) != 1 || got[0] != "Take t-1 from Offer" {
		t.Errorf("delayed: extracted %q", got)
	}

	// Reliable queue: a Take, then a worker's attempt, whose handler runs
	// with the context the propagator returned.
	rd, rk := queueDef(t, false, time.Minute, 3), key(t, "reliable")
	if _, err := lockrt.NewReliableQueue(producer, rd, codec, rk).OfferMany(traced, item{5, 6}, item{7, 8}); err != nil {
		t.Fatal(err)
	}
	rq := lockrt.NewReliableQueue(consumer, rd, codec, rk)
	del, err := rq.TryTake(ctx, time.Second)
	if err != nil || del.Value != (item{5, 6}) {
		t.Fatalf("reliable take: %+v, %v", del, err)
	}
	if err := del.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	handled := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- rq.Serve(sctx, func(ctx context.Context, v item) error {
			tr, _ := ctx.Value(traceKey{}).(string)
			op, _ := ctx.Value(spanKey{}).(string)
			handled <- fmt.Sprintf("%v %s %s", v, op, tr)
			return nil
		}, lockrt.WithShutdownTimeout(time.Second))
	}()
	select {
	case h := <-handled:
		if h != "{7 8} Process t-1" {
			t.Errorf("handler ran with %q; want the item in the Process context with the carried trace", h)
		}
	case <-ctx.Done():
		t.Fatal("the worker handled nothing")
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	got := consProp.take()
	want := []string{"Take t-1 from Offer", "Take t-1 from Offer", "Process t-1 from Offer"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reliable: extracted %q; want %q", got, want)
	}
	if got := prodProp.take(); len(got) != 0 {
		t.Errorf("the producer's propagator extracted %q", got)
	}
}
