package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestReliableMoveTo: MoveTo takes an item of one reliable queue (waiting
// for one) and enqueues it on another, acknowledged at the source; a move
// cut short after its enqueue (the delivery comes back to the source)
// moved again adds nothing on the destination and returns the first id.
func TestReliableMoveTo(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		d := queueDef(t, false, 5*time.Second, 3)
		src := lockrt.NewReliableQueue(c, d, lockrt.JSON[string]{}, key(t, "src"))
		dst := lockrt.NewReliableQueue(c, d, lockrt.JSON[string]{}, key(t, "dst"))
		if _, _, err := src.MoveTo(ctx, src); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("a move to itself: %v", err)
		}
		if _, _, err := src.TryMoveTo(ctx, 0, dst); !errors.Is(err, lockrt.ErrEmpty) {
			t.Fatalf("TryMoveTo of an empty queue: %v", err)
		}
		if _, err := src.Enqueue(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		v, id, err := src.MoveTo(ctx, dst)
		if err != nil || v != "x" || id == "" {
			t.Fatalf("MoveTo: %q, %q, %v", v, id, err)
		}
		checkStats(t, src, 0, 0)
		checkStats(t, dst, 1, 0)

		// Waiting for an item.
		moved := inBackground(t, func() (string, error) { v, _, err := src.MoveTo(ctx, dst); return v, err })
		waitTakers(t, c.Redis(), src.Key(), 1)
		if _, err := src.Enqueue(ctx, "y"); err != nil {
			t.Fatal(err)
		}
		if v := <-moved; v != "y" {
			t.Fatalf("moved %q, want y", v)
		}
		checkStats(t, dst, 2, 0)

		// A move cut short after its enqueue: the delivery goes back.
		if _, err := src.Enqueue(ctx, "z"); err != nil {
			t.Fatal(err)
		}
		dl, err := src.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first, err := dst.Enqueue(ctx, dl.Value, lockrt.WithKey("move:"+src.Key()+":"+dl.ID(), time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := dl.Release(ctx); err != nil {
			t.Fatal(err)
		}
		v, again, err := src.MoveTo(ctx, dst)
		if err != nil || v != "z" || again != first {
			t.Fatalf("moving it again: %q as %q (%v), want z as %q", v, again, err, first)
		}
		checkStats(t, src, 0, 0)
		checkStats(t, dst, 3, 0) // x, y, z: z once
	})
}

// checkStats checks a reliable queue's ready and in-flight counts.
func checkStats[T any](t *testing.T, q *lockrt.ReliableQueue[T], ready, inFlight int64) {
	t.Helper()
	st, err := q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready != ready || st.InFlight != inFlight {
		t.Fatalf("%s: %d ready, %d in flight; want %d and %d", q.Key(), st.Ready, st.InFlight, ready, inFlight)
	}
}

// TestPlainMoveTo: a plain queue's MoveTo takes an item and offers it to
// another queue, waiting for one; TryMoveTo of an empty queue is ErrEmpty.
func TestPlainMoveTo(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		d := queueDef(t, false, 0, 0)
		src := lockrt.NewQueue(c, d, lockrt.JSON[int]{}, key(t, "src"))
		dst := lockrt.NewQueue(c, d, lockrt.JSON[int]{}, key(t, "dst"))
		if _, err := src.MoveTo(ctx, nil); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("a move to nil: %v", err)
		}
		if _, err := src.TryMoveTo(ctx, 0, dst); !errors.Is(err, lockrt.ErrEmpty) {
			t.Fatalf("TryMoveTo of an empty queue: %v", err)
		}
		moved := inBackground(t, func() (int, error) { return src.MoveTo(ctx, dst) })
		waitTakers(t, c.Redis(), src.Key(), 1)
		must(t, src.Offer(ctx, 7))
		if v := <-moved; v != 7 {
			t.Fatalf("moved %d, want 7", v)
		}
		if n, err := src.Len(ctx); err != nil || n != 0 {
			t.Fatalf("source: %d left (%v)", n, err)
		}
		if v, err := dst.TryTake(ctx, 0); err != nil || v != 7 {
			t.Fatalf("destination: %d, %v", v, err)
		}
	})
}
