package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
)

// opsQueue is the part of Queue and ReliableQueue the tests of Peek,
// Remove, Drain and batch Take share.
type opsQueue[T any] interface {
	OfferMany(ctx context.Context, vs ...T) error
	OfferIn(ctx context.Context, v T, delay time.Duration) error
	Peek(ctx context.Context) (T, error)
	PeekN(ctx context.Context, n int) ([]T, error)
	Remove(ctx context.Context, v T) (bool, error)
	RemoveAll(ctx context.Context, v T) (int, error)
	Drain(ctx context.Context) ([]T, error)
	Stats(ctx context.Context) (lockrt.QueueStats, error)
	Len(ctx context.Context) (int64, error)
}

// relOps is a reliable queue as an opsQueue or a drainer: its offers'
// ids dropped.
type relOps[T any] struct {
	*lockrt.DelayedReliableQueue[T]
}

func (q relOps[T]) OfferMany(ctx context.Context, vs ...T) error {
	return errOnly(q.DelayedReliableQueue.OfferMany(ctx, vs...))
}

func (q relOps[T]) OfferIn(ctx context.Context, v T, delay time.Duration) error {
	return errOnly(q.DelayedReliableQueue.OfferIn(ctx, v, delay))
}

// eachQueueMode runs f on a delayed plain queue and a delayed reliable
// queue of ints, on every backend. take takes up to n items (deliveries
// are acknowledged).
func eachQueueMode(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, k string, q opsQueue[int], take func(n int) ([]int, error))) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, reliable := range []bool{false, true} {
			t.Run(fmt.Sprintf("reliable=%v", reliable), func(t *testing.T) {
				ctx := withTimeout(t, 20*time.Second)
				rdb := b.new()
				t.Cleanup(func() { rdb.Close() })
				c := lockrt.New(rdb)
				t.Cleanup(func() { c.Close() })
				k := key(t)
				if !reliable {
					q := lockrt.NewDelayedQueue(c, queueDef(t, true, 0, 0), lockrt.JSON[int]{}, k)
					f(t, rdb, k, q, func(n int) ([]int, error) { return q.TryTakeN(ctx, n, 0) })
					return
				}
				q := lockrt.NewDelayedReliableQueue(c, queueDef(t, true, time.Minute, 3), lockrt.JSON[int]{}, k)
				f(t, rdb, k, relOps[int]{q}, func(n int) ([]int, error) {
					ds, err := q.TryTakeN(ctx, n, 0)
					var vs []int
					for _, d := range ds {
						vs = append(vs, d.Value)
						if err := d.Ack(ctx); err != nil {
							t.Fatal(err)
						}
					}
					return vs, err
				})
			})
		}
	})
}

// TestQueuePeek: Peek and PeekN return the first ready items without
// taking them (nor, on a reliable queue, starting a delivery).
func TestQueuePeek(t *testing.T) {
	eachQueueMode(t, func(t *testing.T, _ redis.UniversalClient, _ string, q opsQueue[int], take func(int) ([]int, error)) {
		ctx := withTimeout(t, 20*time.Second)
		if _, err := q.Peek(ctx); !errors.Is(err, lockrt.ErrEmpty) {
			t.Errorf("Peek of an empty queue: err = %v, want ErrEmpty", err)
		}
		if _, err := q.PeekN(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("PeekN(0): err = %v, want ErrInvalidArgument", err)
		}
		if err := q.OfferIn(ctx, 99, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := q.OfferMany(ctx, 1, 2, 3, 4); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if v, err := q.Peek(ctx); err != nil || v != 1 {
				t.Fatalf("Peek = %v, %v; want 1", v, err)
			}
		}
		if vs, err := q.PeekN(ctx, 3); err != nil || !slices.Equal(vs, []int{1, 2, 3}) {
			t.Fatalf("PeekN(3) = %v, %v; want [1 2 3]", vs, err)
		}
		if vs, err := q.PeekN(ctx, 10); err != nil || !slices.Equal(vs, []int{1, 2, 3, 4}) {
			t.Fatalf("PeekN(10) = %v, %v; want the 4 ready items, not the delayed one", vs, err)
		}
		if st, err := q.Stats(ctx); err != nil || st != (lockrt.QueueStats{Ready: 4, Delayed: 1}) {
			t.Fatalf("after peeking: stats %+v, %v; want 4 ready, 1 delayed, none in flight", st, err)
		}
		if vs, err := take(1); err != nil || !slices.Equal(vs, []int{1}) {
			t.Fatalf("take = %v, %v", vs, err)
		}
		if v, err := q.Peek(ctx); err != nil || v != 2 {
			t.Fatalf("Peek after a take = %v, %v; want 2", v, err)
		}
	})
}

// TestQueueRemove: Remove takes out the first ready item equal to the
// value, else the delayed one due first; RemoveAll every ready and
// delayed one; deliveries in flight stay; nothing is left behind in the
// queue's other keys.
func TestQueueRemove(t *testing.T) {
	eachQueueMode(t, func(t *testing.T, rdb redis.UniversalClient, k string, q opsQueue[int], take func(int) ([]int, error)) {
		ctx := withTimeout(t, 20*time.Second)
		if err := q.OfferMany(ctx, 1, 2, 1, 3, 1); err != nil {
			t.Fatal(err)
		}
		for _, v := range []int{1, 4, 1} {
			if err := q.OfferIn(ctx, v, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := q.Remove(ctx, 1); err != nil || !ok {
			t.Fatalf("Remove(1) = %v, %v", ok, err)
		}
		if vs, err := q.PeekN(ctx, 10); err != nil || !slices.Equal(vs, []int{2, 1, 3, 1}) {
			t.Fatalf("after Remove(1): ready %v, %v; want [2 1 3 1] (the first 1 gone)", vs, err)
		}
		if ok, err := q.Remove(ctx, 5); err != nil || ok {
			t.Fatalf("Remove(5) = %v, %v; want false", ok, err)
		}
		if ok, err := q.Remove(ctx, 4); err != nil || !ok {
			t.Fatalf("Remove(4), a delayed item = %v, %v", ok, err)
		}
		if st, err := q.Stats(ctx); err != nil || st != (lockrt.QueueStats{Ready: 4, Delayed: 2}) {
			t.Fatalf("stats %+v, %v; want 4 ready, 2 delayed", st, err)
		}
		if n, err := q.RemoveAll(ctx, 1); err != nil || n != 4 {
			t.Fatalf("RemoveAll(1) = %d, %v; want 2 ready + 2 delayed", n, err)
		}
		if vs, err := q.PeekN(ctx, 10); err != nil || !slices.Equal(vs, []int{2, 3}) {
			t.Fatalf("after RemoveAll(1): ready %v, %v; want [2 3]", vs, err)
		}
		if st, err := q.Stats(ctx); err != nil || st != (lockrt.QueueStats{Ready: 2}) {
			t.Fatalf("stats %+v, %v; want 2 ready", st, err)
		}
		// Only the ready items' bodies are left (a reliable queue's, by id).
		wantData := int64(0)
		if rq, ok := q.(relOps[int]); ok {
			wantData = 2
			// A delivery in flight is not removed.
			d, err := rq.Take(ctx)
			if err != nil || d.Value != 2 {
				t.Fatalf("Take = %+v, %v", d, err)
			}
			if n, err := q.RemoveAll(ctx, 2); err != nil || n != 0 {
				t.Fatalf("RemoveAll of an item in flight = %d, %v; want 0", n, err)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			wantData = 1
			for _, sub := range []string{"att", "err"} {
				if n, err := rdb.HLen(ctx, keys.Sub(k, sub)).Result(); err != nil || n != 0 {
					t.Errorf("%s holds %d fields, %v; want 0", sub, n, err)
				}
			}
		}
		if n, err := rdb.HLen(ctx, keys.Sub(k, "data")).Result(); err != nil || n != wantData {
			t.Errorf("data holds %d bodies, %v; want %d", n, err, wantData)
		}
		if vs, err := take(10); err != nil || !slices.Equal(vs, []int{3}) && !slices.Equal(vs, []int{2, 3}) {
			t.Fatalf("take = %v, %v; want the rest", vs, err)
		}
	})
}

// TestQueueTakeN: a batch take returns up to n items in order, in one
// round trip; on a reliable queue each is a delivery in flight.
func TestQueueTakeN(t *testing.T) {
	eachQueueMode(t, func(t *testing.T, _ redis.UniversalClient, _ string, q opsQueue[int], take func(int) ([]int, error)) {
		ctx := withTimeout(t, 20*time.Second)
		if _, err := take(3); !errors.Is(err, lockrt.ErrEmpty) {
			t.Errorf("TryTakeN of an empty queue: err = %v, want ErrEmpty", err)
		}
		if err := q.OfferMany(ctx, 1, 2, 3, 4, 5, 6, 7); err != nil {
			t.Fatal(err)
		}
		if vs, err := take(4); err != nil || !slices.Equal(vs, []int{1, 2, 3, 4}) {
			t.Fatalf("TryTakeN(4) = %v, %v", vs, err)
		}
		if vs, err := take(100); err != nil || !slices.Equal(vs, []int{5, 6, 7}) {
			t.Fatalf("TryTakeN(100) = %v, %v", vs, err)
		}
		if n, err := q.Len(ctx); err != nil || n != 0 {
			t.Fatalf("Len = %d, %v; want 0", n, err)
		}
	})
}

// TestReliableTakeN: every delivery of a batch is in flight with the
// batch's deadline until settled on its own; an item that does not decode
// is dead-lettered and the others are returned; a blocked TakeN returns
// what arrives.
func TestReliableTakeN(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		c := namedClient(t, b)
		d, k := queueDef(t, false, time.Minute, 3), key(t)
		q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, k)
		if _, err := q.TakeN(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("TakeN(0): err = %v, want ErrInvalidArgument", err)
		}
		if _, err := q.TryTakeN(ctx, 1, -1); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("TryTakeN with a negative wait: err = %v, want ErrInvalidArgument", err)
		}
		if _, err := q.OfferMany(ctx, 1, 2); err != nil {
			t.Fatal(err)
		}
		if _, err := lockrt.NewReliableQueue(c, d, lockrt.JSON[string]{}, k).Offer(ctx, "poison"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.OfferMany(ctx, 3, 4); err != nil {
			t.Fatal(err)
		}
		ds, err := q.TakeN(ctx, 4)
		if err != nil {
			t.Fatal(err)
		}
		var vs []int
		ids := map[string]bool{}
		for _, dl := range ds {
			vs = append(vs, dl.Value)
			ids[dl.ID()] = true
			if dl.Attempt() != 1 || !dl.Deadline().Equal(ds[0].Deadline()) {
				t.Errorf("delivery %s: attempt %d, deadline %v; want 1, %v", dl.ID(), dl.Attempt(), dl.Deadline(), ds[0].Deadline())
			}
		}
		if !slices.Equal(vs, []int{1, 2, 3}) || len(ids) != 3 {
			t.Fatalf("TakeN(4) = %v with %d ids; want [1 2 3] (the poison item dead-lettered)", vs, len(ids))
		}
		if st, err := q.Stats(ctx); err != nil || st != (lockrt.QueueStats{Ready: 1, InFlight: 3, Dead: 1}) {
			t.Fatalf("stats %+v, %v; want 1 ready, 3 in flight, 1 dead", st, err)
		}
		if err := ds[1].Nack(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, dl := range []*lockrt.Delivery[int]{ds[0], ds[2]} {
			if err := dl.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ds, err = q.TakeN(ctx, 10)
		if err != nil || len(ds) != 2 || ds[0].Value != 4 || ds[1].Value != 2 || ds[1].Attempt() != 2 {
			t.Fatalf("TakeN(10) = %v, %v; want 4 and 2's second delivery", ds, err)
		}
		for _, dl := range ds {
			if err := dl.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// A blocked TakeN takes what a producer offers.
		got := make(chan []*lockrt.Delivery[int], 1)
		go func() {
			ds, err := q.TakeN(ctx, 5)
			if err != nil {
				t.Error(err)
			}
			got <- ds
		}()
		waitTakers(t, c.Redis(), q.Key(), 1)
		if _, err := q.OfferMany(ctx, 5, 6); err != nil {
			t.Fatal(err)
		}
		ds = <-got
		if len(ds) == 0 || ds[0].Value != 5 {
			t.Fatalf("blocked TakeN = %v; want 5 first", ds)
		}
		for _, dl := range ds {
			if err := dl.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestQueueTakeNWaits: a plain queue's waiting TakeN (registered in the
// queue's takers, woken by the offer) takes what a producer offers, in
// order.
func TestQueueTakeNWaits(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		c, d, k := namedClient(t, b), queueDef(t, false, 0, 0), key(t)
		q := lockrt.NewQueue(c, d, lockrt.JSON[int]{}, k)
		// Through a client of its own, unnamed: under load the blocked
		// command of a TryTakeN that gave up may still be on the server
		// when waitBlocked looks for TakeN's by the name.
		empty := lockrt.NewQueue(newClient(t, b), d, lockrt.JSON[int]{}, k)
		if _, err := empty.TryTakeN(ctx, 2, 50*time.Millisecond); !errors.Is(err, lockrt.ErrEmpty) {
			t.Errorf("TryTakeN of an empty queue: err = %v, want ErrEmpty", err)
		}
		got := make(chan []int, 1)
		go func() {
			vs, err := q.TakeN(ctx, 3)
			if err != nil {
				t.Error(err)
			}
			got <- vs
		}()
		waitTakers(t, c.Redis(), k, 1)
		if err := q.OfferMany(ctx, 1, 2, 3, 4); err != nil {
			t.Fatal(err)
		}
		if vs := <-got; !slices.Equal(vs, []int{1, 2, 3}) {
			t.Fatalf("blocked TakeN(3) = %v; want [1 2 3]", vs)
		}
		if vs, err := q.TakeN(ctx, 3); err != nil || !slices.Equal(vs, []int{4}) {
			t.Fatalf("TakeN(3) = %v, %v; want [4]", vs, err)
		}
	})
}

// TestQueueDrain: Drain takes every ready item (more than one script
// call's batch), in order, leaves delayed items (and a reliable queue's
// deliveries in flight), dead-letters what does not decode, and leaves no
// bodies behind.
func TestQueueDrain(t *testing.T) {
	eachQueueMode(t, func(t *testing.T, rdb redis.UniversalClient, k string, q opsQueue[int], take func(int) ([]int, error)) {
		ctx := withTimeout(t, 20*time.Second)
		if vs, err := q.Drain(ctx); err != nil || len(vs) != 0 {
			t.Fatalf("Drain of an empty queue = %v, %v", vs, err)
		}
		const n = 2500
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		if err := q.OfferMany(ctx, want...); err != nil {
			t.Fatal(err)
		}
		if err := q.OfferIn(ctx, -1, time.Hour); err != nil {
			t.Fatal(err)
		}
		inFlight := int64(0)
		if rq, ok := q.(relOps[int]); ok {
			if _, err := rq.Take(ctx); err != nil { // 0 goes in flight
				t.Fatal(err)
			}
			want, inFlight = want[1:], 1
		}
		vs, err := q.Drain(ctx)
		if err != nil || !slices.Equal(vs, want) {
			t.Fatalf("Drain = %d items, %v; want %d in order", len(vs), err, len(want))
		}
		if st, err := q.Stats(ctx); err != nil || st != (lockrt.QueueStats{Delayed: 1, InFlight: inFlight}) {
			t.Fatalf("after Drain: stats %+v, %v; want the delayed item (and the one in flight) only", st, err)
		}
		if n, err := rdb.HLen(ctx, keys.Sub(k, "data")).Result(); err != nil || n != 1+inFlight {
			t.Errorf("data holds %d bodies, %v; want %d (the delayed item's, the one in flight's)", n, err, 1+inFlight)
		}
	})
}

// drainer is what TestQueueDrainPoison uses of a queue.
type drainer[T any] interface {
	OfferMany(ctx context.Context, vs ...T) error
	Drain(ctx context.Context) ([]T, error)
	DeadLetters(ctx context.Context, n int) ([]lockrt.DeadLetter[T], error)
}

// TestQueueDrainPoison: an item that does not decode is dead-lettered by
// Drain, which returns the others.
func TestQueueDrainPoison(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		c := newClient(t, b)
		for _, reliable := range []bool{false, true} {
			k := key(t, fmt.Sprint(reliable))
			var q drainer[int]
			var bad drainer[string]
			if reliable {
				d := queueDef(t, true, time.Minute, 3)
				q, bad = relOps[int]{lockrt.NewDelayedReliableQueue(c, d, lockrt.JSON[int]{}, k)}, relOps[string]{lockrt.NewDelayedReliableQueue(c, d, lockrt.String{}, k)}
			} else {
				d := queueDef(t, false, 0, 0)
				q, bad = lockrt.NewQueue(c, d, lockrt.JSON[int]{}, k), lockrt.NewQueue(c, d, lockrt.String{}, k)
			}
			if err := q.OfferMany(ctx, 1, 2); err != nil {
				t.Fatal(err)
			}
			if err := bad.OfferMany(ctx, "poison"); err != nil {
				t.Fatal(err)
			}
			if err := q.OfferMany(ctx, 3); err != nil {
				t.Fatal(err)
			}
			if vs, err := q.Drain(ctx); err != nil || !slices.Equal(vs, []int{1, 2, 3}) {
				t.Fatalf("reliable=%v: Drain = %v, %v; want [1 2 3]", reliable, vs, err)
			}
			dead, err := bad.DeadLetters(ctx, 10)
			if err != nil || len(dead) != 1 || dead[0].Value != "poison" {
				t.Fatalf("reliable=%v: dead letters %+v, %v; want the poison item", reliable, dead, err)
			}
		}
	})
}

// TestQueueRemoveCarried: Remove compares the codec's bytes, whatever an
// ItemPropagator made the items carry (a version-2 envelope, with a
// carrier section of one length byte or of several), on both queue kinds;
// an item whose bytes end with the value's is not equal to it.
func TestQueueRemoveCarried(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		rdb := b.new()
		t.Cleanup(func() { rdb.Close() })
		producer := lockrt.New(rdb, lockrt.WithObserver(&propagator{}))
		t.Cleanup(func() { producer.Close() })
		other := newClient(t, b)
		short := context.WithValue(ctx, traceKey{}, "t-1")
		long := context.WithValue(ctx, traceKey{}, strings.Repeat("x", 300)) // a 2-byte uvarint length
		for _, reliable := range []bool{false, true} {
			vis := time.Duration(0)
			if reliable {
				vis = time.Minute
			}
			d, k := queueDef(t, true, vis, 3), key(t, fmt.Sprint(reliable))
			var offer func(ctx context.Context, vs ...int) error
			var offerIn func(ctx context.Context, v int) error
			var q opsQueue[int]
			if reliable {
				p := relOps[int]{lockrt.NewDelayedReliableQueue(producer, d, lockrt.JSON[int]{}, k)}
				offer, offerIn = p.OfferMany, func(ctx context.Context, v int) error { return p.OfferIn(ctx, v, time.Hour) }
				q = relOps[int]{lockrt.NewDelayedReliableQueue(other, d, lockrt.JSON[int]{}, k)}
			} else {
				p := lockrt.NewDelayedQueue(producer, d, lockrt.JSON[int]{}, k)
				offer, offerIn = p.OfferMany, func(ctx context.Context, v int) error { return p.OfferIn(ctx, v, time.Hour) }
				q = lockrt.NewDelayedQueue(other, d, lockrt.JSON[int]{}, k)
			}
			for _, c := range []context.Context{ctx, short, long} {
				if err := offer(c, 1, 11); err != nil {
					t.Fatal(err)
				}
				if err := offerIn(c, 1); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := q.RemoveAll(ctx, 1); err != nil || n != 6 {
				t.Fatalf("reliable=%v: RemoveAll(1) = %d, %v; want 3 ready + 3 delayed, traced or not", reliable, n, err)
			}
			if vs, err := q.PeekN(ctx, 10); err != nil || !slices.Equal(vs, []int{11, 11, 11}) {
				t.Fatalf("reliable=%v: left %v, %v; want the three 11s", reliable, vs, err)
			}
		}
	})
}
