package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestReliableManyClients: 100k items through 4 producers and 4 consumers
// on separate clients; with acks, every item is delivered exactly once.
func TestReliableManyClients(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const producers, consumers = 4, 4
		per := manyItems() / producers
		d, k := queueDef(t, false, time.Minute, 5), key(t)
		l := newLedger(producers, per)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var wg sync.WaitGroup
		for range consumers {
			q := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[item]{}, k)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					dl, err := q.Take(ctx)
					if err != nil {
						if !errors.Is(err, context.Canceled) {
							t.Error(err)
						}
						return
					}
					if dl.Attempt() != 1 {
						t.Errorf("item %v delivered for the %d. time", dl.Value, dl.Attempt())
					}
					if err := dl.Ack(context.Background()); err != nil {
						t.Error(err)
						return
					}
					l.record(dl.Value)
				}
			}()
		}
		qs := make([]*lockrt.ReliableQueue[item], producers)
		for p := range qs {
			qs[p] = lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[item]{}, k)
		}
		produce(t, producers, per, func(p int, batch []item) error {
			return errOnly(qs[p].OfferMany(context.Background(), batch...))
		}).Wait()
		l.wait(t)
		stop()
		wg.Wait()
		l.check(t)
		st, err := qs[0].Stats(context.Background())
		if err != nil || st != (lockrt.QueueStats{}) {
			t.Errorf("after every ack: %+v, %v; want an empty queue", st, err)
		}
	})
}

// TestReliableRedelivery: a consumer that dies mid-delivery (its client
// closed without an ack) loses nothing: the item is delivered again after
// the visibility timeout, not before.
func TestReliableRedelivery(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		const vis = 500 * time.Millisecond
		d, k := queueDef(t, false, vis, 5), key(t)
		rdb := b.new()
		dying := lockrt.New(rdb)
		q := lockrt.NewReliableQueue(dying, d, lockrt.JSON[string]{}, k)
		if _, err := q.Offer(ctx, "job"); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		dl, err := q.Take(ctx)
		if err != nil || dl.Value != "job" || dl.Attempt() != 1 {
			t.Fatalf("Take = %+v, %v", dl, err)
		}
		taken := time.Now()
		// The deadline is the server's take time plus vis: between the
		// call and its return plus vis (same machine, same clock), however
		// long a loaded machine took to answer.
		const slack = 20 * time.Millisecond
		if d := dl.Deadline(); d.Before(before.Add(vis-slack)) || d.After(taken.Add(vis+slack)) {
			t.Errorf("Deadline %v after the call, want vis = %v after it (the call took %v)", d.Sub(before), vis, taken.Sub(before))
		}
		dying.Close() // the consumer dies holding the delivery
		rdb.Close()

		other := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[string]{}, k)
		again, err := other.TryTake(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if again.Value != "job" || again.Attempt() != 2 || again.ID() != dl.ID() {
			t.Errorf("redelivered %q as delivery %d of %s, want job, 2, %s", again.Value, again.Attempt(), again.ID(), dl.ID())
		}
		// Never before the first delivery's deadline (the count that
		// matters); the upper bound is TryTake's wait.
		if early := dl.Deadline().Sub(time.Now()); early > slack {
			t.Errorf("redelivered %v before the first delivery's deadline", early)
		}
		if err := again.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReliableUnclaimedMove: a consumer that dies between the blocking
// move and its claim (the item is on the processing list, nobody's
// delivery) loses nothing either.
func TestReliableUnclaimedMove(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		const vis = 300 * time.Millisecond
		d, k := queueDef(t, false, vis, 5), key(t)
		c := newClient(t, b)
		q := lockrt.NewReliableQueue(c, d, lockrt.JSON[string]{}, k)
		if _, err := q.Offer(ctx, "job"); err != nil {
			t.Fatal(err)
		}
		// What a consumer's BLMOVE does before it dies.
		if err := c.Redis().LMove(ctx, k, k+":proc", "LEFT", "RIGHT").Err(); err != nil {
			t.Fatal(err)
		}
		fresh := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[string]{}, k)
		if err := fresh.Start(ctx); err != nil {
			t.Fatal(err)
		}
		dl, err := fresh.TryTake(ctx, 5*time.Second)
		if err != nil || dl.Value != "job" {
			t.Fatalf("TryTake = %+v, %v; want the unclaimed job", dl, err)
		}
		if err := dl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReliablePoison: an item that fails every delivery, by Nack or by
// timeout, reaches the dead letters after maxDeliveries, with its reason;
// re-drive delivers it again from a fresh count.
func TestReliablePoison(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		const max = 3
		d, k := queueDef(t, false, 200*time.Millisecond, max), key(t)
		q := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[string]{}, k)
		if _, err := q.OfferMany(ctx, "nacked", "dropped"); err != nil {
			t.Fatal(err)
		}
		deliveries := map[string]int{}
		for range 2 * max {
			dl, err := q.TryTake(ctx, 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			deliveries[dl.Value]++
			if dl.Attempt() != deliveries[dl.Value] {
				t.Errorf("%s: Attempt %d, want %d", dl.Value, dl.Attempt(), deliveries[dl.Value])
			}
			if dl.Value == "nacked" {
				if err := dl.Nack(ctx, errors.New("payment service says no")); err != nil {
					t.Fatal(err)
				}
			} // "dropped" is left to time out
		}
		// The last timeout is the timer's; wait for it.
		for deadline := time.Now().Add(3 * time.Second); ; {
			st, err := q.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Dead == 2 {
				if st != (lockrt.QueueStats{Dead: 2}) {
					t.Errorf("stats %+v, want just 2 dead", st)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stats %+v, want 2 dead letters", st)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := q.TryTake(ctx, 0); !errors.Is(err, lockrt.ErrEmpty) {
			t.Fatalf("TryTake with only dead letters: err = %v, want ErrEmpty", err)
		}
		dead, err := q.DeadLetters(ctx, 10)
		if err != nil || len(dead) != 2 {
			t.Fatalf("DeadLetters = %+v, %v", dead, err)
		}
		for _, dl := range dead {
			want := map[string]string{"nacked": "payment service says no", "dropped": "visibility timeout"}[dl.Value]
			if want == "" || !strings.Contains(dl.Reason, want) || dl.Deliveries != max || dl.DecodeErr != nil {
				t.Errorf("dead letter %+v: want reason containing %q after %d deliveries", dl, want, max)
			}
		}
		if n, err := q.Redrive(ctx, 1); err != nil || n != 1 {
			t.Fatalf("Redrive(1) = %d, %v", n, err)
		}
		dl, err := q.TryTake(ctx, time.Second)
		if err != nil || dl.Value != dead[0].Value || dl.Attempt() != 1 {
			t.Fatalf("after re-drive: %+v, %v; want %s as a first delivery", dl, err, dead[0].Value)
		}
		if err := dl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReliableExtend: Extend keeps a slow delivery hidden; a settled or
// expired delivery cannot be acked.
func TestReliableExtend(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		const vis = time.Second // extended every vis/2: survives a stall of half of it
		d, k := queueDef(t, false, vis, 5), key(t)
		q := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[int]{}, k)
		other := lockrt.NewReliableQueue(newClient(t, b), d, lockrt.JSON[int]{}, k)
		if _, err := q.Offer(ctx, 7); err != nil {
			t.Fatal(err)
		}
		dl, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := dl.Extend(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("Extend(0): err = %v, want ErrInvalidArgument", err)
		}
		for range 3 {
			time.Sleep(vis / 2)
			if err := dl.Extend(ctx, vis); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := other.TryTake(ctx, vis/2); !errors.Is(err, lockrt.ErrEmpty) {
			t.Fatalf("another consumer took an extended delivery: %v", err)
		}
		if err := dl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if err := dl.Ack(ctx); err != nil {
			t.Errorf("second Ack: err = %v, want nil", err)
		}

		if _, err := q.Offer(ctx, 8); err != nil {
			t.Fatal(err)
		}
		first, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		second, err := other.TryTake(ctx, 5*time.Second) // after the timeout
		if err != nil || second.Value != 8 {
			t.Fatalf("redelivery = %+v, %v", second, err)
		}
		for name, err := range map[string]error{
			"Ack":    first.Ack(ctx),
			"Nack":   first.Nack(ctx, nil),
			"Extend": first.Extend(ctx, time.Second),
		} {
			if !errors.Is(err, lockrt.ErrDeliveryExpired) {
				t.Errorf("%s of an expired delivery: err = %v, want ErrDeliveryExpired", name, err)
			}
		}
		if err := second.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDelayedReliable: a delayed reliable queue delivers a delayed item
// once due, and redelivers it after its visibility timeout.
func TestDelayedReliable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		d, k := queueDef(t, true, 300*time.Millisecond, 2), key(t)
		q := lockrt.NewDelayedReliableQueue(newClient(t, b), d, lockrt.JSON[string]{}, k)
		start := time.Now()
		if _, err := q.OfferIn(ctx, "close order 42", 400*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		dl, err := q.TryTake(ctx, 5*time.Second)
		if err != nil || dl.Value != "close order 42" {
			t.Fatalf("TryTake = %+v, %v", dl, err)
		}
		if since := time.Since(start); since < 400*time.Millisecond || costsChecked && since > 2*time.Second {
			t.Errorf("delivered %v after the offer, want just after 400ms", since)
		}
		again, err := q.TryTake(ctx, 5*time.Second)
		if err != nil || again.Attempt() != 2 {
			t.Fatalf("redelivery = %+v, %v", again, err)
		}
		if err := again.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReliableSettleTwice: a second Ack of an acknowledged delivery is
// harmless (nil, and no command is sent); any other call on a settled
// delivery is ErrDeliverySettled, not ErrDeliveryExpired, also without a
// command; concurrent Acks of one delivery all return nil.
func TestReliableSettleTwice(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		rdb := b.new()
		defer rdb.Close()
		c := lockrt.New(rdb)
		defer c.Close()
		q := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 5), lockrt.JSON[int]{}, key(t))
		if _, err := q.OfferMany(ctx, 1, 2, 3); err != nil {
			t.Fatal(err)
		}
		h := &cmdLog{}
		rdb.AddHook(h)
		s := queueScripts(t)

		acked, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := acked.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		h.take()
		if err := acked.Ack(ctx); err != nil {
			t.Errorf("second Ack: err = %v, want nil", err)
		}
		for name, err := range map[string]error{
			"Nack":    acked.Nack(ctx, nil),
			"Retry":   acked.Retry(ctx, nil, time.Second),
			"Bury":    acked.Bury(ctx, nil),
			"Release": acked.Release(ctx),
			"Extend":  acked.Extend(ctx, time.Minute),
		} {
			if !errors.Is(err, lockrt.ErrDeliverySettled) || errors.Is(err, lockrt.ErrDeliveryExpired) {
				t.Errorf("%s after Ack: err = %v, want ErrDeliverySettled only", name, err)
			}
		}
		if cmds := without(h.take(), s.Move); len(cmds) != 0 {
			t.Errorf("calls on an acknowledged delivery sent %v, want nothing", cmds)
		}

		nacked, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := nacked.Nack(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := nacked.Ack(ctx); !errors.Is(err, lockrt.ErrDeliverySettled) {
			t.Errorf("Ack after Nack: err = %v, want ErrDeliverySettled", err)
		}
		if err := nacked.Nack(ctx, nil); !errors.Is(err, lockrt.ErrDeliverySettled) {
			t.Errorf("second Nack: err = %v, want ErrDeliverySettled", err)
		}

		// Concurrent Acks: one reaches Redis, the others wait for it and
		// find the delivery acknowledged.
		dl, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h.take()
		errs := make(chan error, 8)
		for range 8 {
			go func() { errs <- dl.Ack(ctx) }()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Errorf("concurrent Ack: %v", err)
			}
		}
		if cmds := without(h.take(), s.Move); len(cmds) != 1 {
			t.Errorf("8 concurrent Acks sent %v, want one script call", cmds)
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Of 1, 2, 3: 1 and 3 acknowledged, 2 nacked and ready again.
		if st != (lockrt.QueueStats{Ready: 1}) {
			t.Errorf("stats = %+v, want 1 ready", st)
		}
	})
}
