package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestTakeAny: TakeAny (Redisson's pollFromAny) takes what is ready in
// the first queue that has it, says which queue it came from, waits on
// every queue at once (registered in each one's takers, as a Take is)
// and leaves the others' takers once it took; a consumer woken on a queue
// it did not take from passes the wake-up on, so a plain Take waiting on
// that queue gets its item.
func TestTakeAny(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		d := queueDef(t, false, 0, 0)
		qa := lockrt.NewQueue(c, d, lockrt.JSON[string]{}, key(t, "a"))
		qb := lockrt.NewQueue(c, d, lockrt.JSON[string]{}, key(t, "b"))
		if _, _, err := lockrt.TryTakeAny(ctx, 0, qa, qb); !errors.Is(err, lockrt.ErrEmpty) {
			t.Fatalf("TryTakeAny of empty queues: %v", err)
		}
		if _, _, err := lockrt.TakeAny[string](ctx); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("TakeAny of no queues: %v", err)
		}
		must(t, qb.Offer(ctx, "b1"))
		must(t, qa.Offer(ctx, "a1"))
		if v, from, err := lockrt.TakeAny(ctx, qa, qb); err != nil || v != "a1" || from != qa {
			t.Fatalf("TakeAny with both ready: %q from %v, %v; want a1 from the first", v, from, err)
		}
		if v, from, err := lockrt.TakeAny(ctx, qa, qb); err != nil || v != "b1" || from != qb {
			t.Fatalf("TakeAny: %q from %v, %v; want b1", v, from, err)
		}

		// Waiting on both; an offer to the second wakes it.
		got := inBackground(t, func() (string, error) {
			v, from, err := lockrt.TakeAny(ctx, qa, qb)
			if err == nil && from != qb {
				t.Errorf("took %q from the wrong queue", v)
			}
			return v, err
		})
		waitTakers(t, c.Redis(), qa.Key(), 1)
		waitTakers(t, c.Redis(), qb.Key(), 1)
		must(t, qb.Offer(ctx, "b2"))
		select {
		case v := <-got:
			if v != "b2" {
				t.Fatalf("took %q, want b2", v)
			}
		case <-time.After(failAfter):
			t.Fatal("TakeAny was not woken")
		}
		waitTakers(t, c.Redis(), qa.Key(), 0) // it left the first queue's takers

		// A TakeAny and, after it, a Take on the second queue wait; one
		// item each comes: both are served (a wake-up TakeAny did not
		// use goes on), well before a Take's refresh would find it.
		anyGot := inBackground(t, func() (string, error) { v, _, err := lockrt.TakeAny(ctx, qa, qb); return v, err })
		waitTakers(t, c.Redis(), qa.Key(), 1)
		waitTakers(t, c.Redis(), qb.Key(), 1)
		plain := inBackground(t, func() (string, error) { return qb.TryTake(ctx, lockrt.QueueWaiterTTL/6) })
		waitTakers(t, c.Redis(), qb.Key(), 2)
		must(t, qa.Offer(ctx, "a3")) // first: whichever wake-up comes first, TakeAny finds a3
		must(t, qb.Offer(ctx, "b3"))
		if a, p := <-anyGot, <-plain; a != "a3" || p != "b3" {
			t.Fatalf("TakeAny took %q, the Take %q: want a3 and b3", a, p)
		}
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
