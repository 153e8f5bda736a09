package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// pausable is what the pause tests use of a plain and a reliable queue.
type pausable interface {
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	Paused(ctx context.Context) (bool, time.Time, error)
	Stats(ctx context.Context) (lockrt.QueueStats, error)
}

// TestQueuePause: a paused queue takes offers, and its Takes (a try, a
// batch and a waiting one, plain and reliable) take nothing; a waiting
// Take keeps waiting through an offer's wake-up and takes once Resume
// wakes it; nothing is lost. Pause and Resume are safe to repeat, also
// when a reply was lost.
func TestQueuePause(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, reliable := range []bool{false, true} {
			t.Run(fmt.Sprintf("reliable=%v", reliable), func(t *testing.T) {
				ctx := withTimeout(t, 60*time.Second)
				c, l, rdb := lossyClient(t, b)
				k := key(t)
				var (
					q     pausable
					offer func(v int) error
					take  func(ctx context.Context, wait time.Duration) (int, error)
					takeN func(n int) ([]int, error)
				)
				if reliable {
					rq := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 3), lockrt.JSON[int]{}, k)
					q, offer = rq, func(v int) error { return errOnly(rq.Offer(ctx, v)) }
					take = func(ctx context.Context, wait time.Duration) (int, error) {
						d, err := rq.TryTake(ctx, wait)
						if err != nil {
							return 0, err
						}
						return d.Value, d.Ack(ctx)
					}
					takeN = func(n int) ([]int, error) {
						ds, err := rq.TryTakeN(ctx, n, 0)
						var out []int
						for _, d := range ds {
							out = append(out, d.Value)
							if err := d.Ack(ctx); err != nil {
								return out, err
							}
						}
						return out, err
					}
				} else {
					pq := lockrt.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, k)
					q, offer, take = pq, func(v int) error { return pq.Offer(ctx, v) }, pq.TryTake
					takeN = func(n int) ([]int, error) { return pq.TryTakeN(ctx, n, 0) }
				}
				for i := 1; i <= 2; i++ {
					if err := offer(i); err != nil {
						t.Fatal(err)
					}
				}
				l.lose(script(t, "queue_pause").SHA1, 1)
				if err := q.Pause(ctx); err != nil {
					t.Fatalf("Pause with its reply lost: %v", err)
				}
				mustLose(t, l)
				paused, since, err := q.Paused(ctx)
				if err != nil || !paused || since.IsZero() {
					t.Fatalf("Paused = %v, %v, %v; want paused", paused, since, err)
				}
				if err := q.Pause(ctx); err != nil {
					t.Fatal(err)
				}
				if _, again, err := q.Paused(ctx); err != nil || !again.Equal(since) {
					t.Fatalf("a second Pause moved the time paused from %v to %v (%v)", since, again, err)
				}
				if _, err := take(ctx, 0); !errors.Is(err, lockrt.ErrEmpty) {
					t.Fatalf("TryTake of a paused queue: %v, want ErrEmpty", err)
				}
				if vs, err := takeN(5); !errors.Is(err, lockrt.ErrEmpty) || len(vs) != 0 {
					t.Fatalf("TryTakeN of a paused queue: %v, %v; want ErrEmpty", vs, err)
				}
				if st, err := q.Stats(ctx); err != nil || !st.Paused || st.Ready != 2 {
					t.Fatalf("stats %+v (%v), want paused with 2 ready", st, err)
				}

				// A waiting Take waits through an offer (whose wake-up
				// finds the queue paused) until Resume.
				got := make(chan int, 1)
				go func() {
					v, err := take(ctx, 50*time.Second)
					if err != nil {
						t.Errorf("waiting Take: %v", err)
					}
					got <- v
				}()
				waitTakers(t, rdb, k, 1)
				if err := offer(3); err != nil {
					t.Fatal(err)
				}
				waitTakers(t, rdb, k, 1) // woken by the offer, it registered again
				if st, err := q.Stats(ctx); err != nil || st.Ready != 3 {
					t.Fatalf("stats %+v (%v), want 3 ready while paused", st, err)
				}
				select {
				case v := <-got:
					t.Fatalf("a waiting Take of a paused queue took %d", v)
				default:
				}
				l.lose(script(t, "queue_pause").SHA1, 1)
				if err := q.Resume(ctx); err != nil {
					t.Fatalf("Resume with its reply lost: %v", err)
				}
				mustLose(t, l)
				if err := q.Resume(ctx); err != nil {
					t.Fatal(err)
				}
				var taken []int
				select {
				case v := <-got:
					taken = append(taken, v)
				case <-time.After(failAfter):
					t.Fatal("Resume did not wake the waiting Take")
				}
				if paused, _, err := q.Paused(ctx); err != nil || paused {
					t.Fatalf("Paused after Resume = %v, %v", paused, err)
				}
				rest, err := takeN(5)
				if err != nil {
					t.Fatal(err)
				}
				taken = append(taken, rest...)
				slices.Sort(taken)
				if !slices.Equal(taken, []int{1, 2, 3}) {
					t.Fatalf("took %v, want 1, 2, 3", taken)
				}
			})
		}
	})
}

// TestQueuePauseKeepsDelayTimer: the delay timer moves due items of a
// paused queue (a Take takes them once resumed), and deliveries in flight
// settle as usual while it is paused.
func TestQueuePauseKeepsDelayTimer(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 30*time.Second)
		c := newClient(t, b)
		q := lockrt.NewDelayedReliableQueue(c, queueDef(t, true, time.Minute, 3), lockrt.JSON[int]{}, key(t))
		if _, err := q.Offer(ctx, 1); err != nil {
			t.Fatal(err)
		}
		d, err := q.TryTake(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("Extend while paused: %v", err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("Ack while paused: %v", err)
		}
		if _, err := q.OfferIn(ctx, 2, 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		eventually(t, failAfter, func() bool {
			st, err := q.Stats(ctx)
			return err == nil && st.Ready == 1 && st.Delayed == 0
		}, "the delay timer did not move the due item of a paused queue")
		if _, err := q.TryTake(ctx, 0); !errors.Is(err, lockrt.ErrEmpty) {
			t.Fatalf("TryTake while paused: %v, want ErrEmpty", err)
		}
		if err := q.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if d, err := q.TryTake(ctx, 0); err != nil || d.Value != 2 {
			t.Fatalf("TryTake after Resume: %v, %v", d, err)
		}
	})
}

// TestQueueItemActions: RunNow, BuryID, RedriveID and RemoveID act on one
// item by id, wherever it is, once (a lost reply answers the first run's
// result); an item where the action does not apply is ErrItemState and
// unchanged; an item made ready wakes a waiting Take.
func TestQueueItemActions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 60*time.Second)
		c, l, rdb := lossyClient(t, b)
		k := key(t, "reliable")
		q := lockrt.NewDelayedReliableQueue(c, queueDef(t, true, time.Minute, 3), lockrt.JSON[int]{}, k)
		stats := func(want lockrt.QueueStats) {
			t.Helper()
			if st, err := q.Stats(ctx); err != nil || st != want {
				t.Fatalf("stats %+v (%v), want %+v", st, err, want)
			}
		}
		id, err := q.Enqueue(ctx, 1, lockrt.After(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := q.RedriveID(ctx, id); !errors.Is(err, lockrt.ErrItemState) || ok {
			t.Fatalf("RedriveID of a delayed item: %v, %v; want ErrItemState", ok, err)
		}
		l.lose(script(t, "queue_item").SHA1, 1)
		if ok, err := q.RunNow(ctx, id); err != nil || !ok {
			t.Fatalf("RunNow with its reply lost: %v, %v", ok, err)
		}
		mustLose(t, l)
		stats(lockrt.QueueStats{Ready: 1})
		if ok, err := q.RunNow(ctx, id); err != nil || ok {
			t.Fatalf("RunNow of a ready item: %v, %v; want false, nil", ok, err)
		}
		if ok, err := q.BuryID(ctx, id, "by hand"); err != nil || !ok {
			t.Fatalf("BuryID: %v, %v", ok, err)
		}
		stats(lockrt.QueueStats{Dead: 1})
		dead, err := q.DeadLetters(ctx, 10)
		if err != nil || len(dead) != 1 || dead[0].ID != id || dead[0].Reason != "by hand" || dead[0].Value != 1 {
			t.Fatalf("dead letters %+v (%v), want item %s buried by hand", dead, err, id)
		}
		if ok, err := q.BuryID(ctx, id, "again"); err != nil || ok {
			t.Fatalf("BuryID of a dead letter: %v, %v; want false, nil", ok, err)
		}
		if ok, err := q.RedriveID(ctx, id); err != nil || !ok {
			t.Fatalf("RedriveID: %v, %v", ok, err)
		}
		stats(lockrt.QueueStats{Ready: 1})
		d, err := q.TryTake(ctx, 0)
		if err != nil || d.ID() != id || d.Attempt() != 1 {
			t.Fatalf("took %v (%v), want item %s's first delivery", d, err, id)
		}
		for name, act := range map[string]func() (bool, error){
			"RunNow": func() (bool, error) { return q.RunNow(ctx, id) },
			"BuryID": func() (bool, error) { return q.BuryID(ctx, id, "x") },
		} {
			if ok, err := act(); !errors.Is(err, lockrt.ErrItemState) || ok {
				t.Fatalf("%s of a delivery in flight: %v, %v; want ErrItemState", name, ok, err)
			}
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := q.RunNow(ctx, id); err != nil || ok {
			t.Fatalf("RunNow of an acknowledged item: %v, %v; want false, nil", ok, err)
		}
		if _, err := q.RunNow(ctx, ""); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("RunNow without an id: %v, want ErrInvalidArgument", err)
		}

		// RunNow wakes a waiting Take.
		got := make(chan string, 1)
		go func() {
			d, err := q.TryTake(ctx, 50*time.Second)
			if err != nil {
				t.Errorf("waiting Take: %v", err)
				got <- ""
				return
			}
			got <- d.ID()
			_ = d.Ack(ctx)
		}()
		waitTakers(t, rdb, k, 1)
		later, err := q.Enqueue(ctx, 2, lockrt.After(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := q.RunNow(ctx, later); err != nil || !ok {
			t.Fatalf("RunNow: %v, %v", ok, err)
		}
		select {
		case id := <-got:
			if id != later {
				t.Fatalf("the waiting Take took %q, want %q", id, later)
			}
		case <-time.After(failAfter):
			t.Fatal("RunNow did not wake the waiting Take")
		}

		// A plain delayed queue: its delayed items and dead letters have ids.
		pq := lockrt.NewDelayedQueue(c, queueDef(t, true, 0, 0), lockrt.JSON[int]{}, key(t, "plain"))
		for i := 10; i < 13; i++ {
			if err := pq.OfferIn(ctx, i, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		ds, err := pq.PeekDelayed(ctx, 3)
		if err != nil || len(ds) != 3 {
			t.Fatalf("PeekDelayed: %v, %v", ds, err)
		}
		if ok, err := pq.RunNow(ctx, ds[0].ID); err != nil || !ok {
			t.Fatalf("RunNow of a plain delayed item: %v, %v", ok, err)
		}
		if v, err := pq.TryTake(ctx, 0); err != nil || v != ds[0].Value {
			t.Fatalf("took %v (%v), want %d", v, err, ds[0].Value)
		}
		if ok, err := pq.BuryID(ctx, ds[1].ID, "by hand"); err != nil || !ok {
			t.Fatalf("BuryID of a plain delayed item: %v, %v", ok, err)
		}
		if ok, err := pq.RedriveID(ctx, ds[1].ID); err != nil || !ok {
			t.Fatalf("RedriveID of a plain dead letter: %v, %v", ok, err)
		}
		if v, err := pq.TryTake(ctx, 0); err != nil || v != ds[1].Value {
			t.Fatalf("took %v (%v), want %d", v, err, ds[1].Value)
		}
		if ok, err := pq.RemoveID(ctx, ds[2].ID); err != nil || !ok {
			t.Fatalf("RemoveID of a plain delayed item: %v, %v", ok, err)
		}
		if ok, err := pq.RemoveID(ctx, ds[2].ID); err != nil || ok {
			t.Fatalf("RemoveID again: %v, %v; want false", ok, err)
		}
		if st, err := pq.Stats(ctx); err != nil || st != (lockrt.QueueStats{}) {
			t.Fatalf("stats %+v (%v), want an empty queue", st, err)
		}
		if n, err := rdb.Exists(ctx, pq.Key()+":data").Result(); err != nil || n != 0 {
			t.Fatalf("the plain queue's data hash is left: %d (%v)", n, err)
		}
	})
}

// TestUniqueKeyCarried: an item enqueued under a unique key carries it
// (Delivery.UniqueKey, SplitItem's fields for inspect) besides what a
// propagator adds, while Remove by value still finds it; a second Unique
// enqueue within the spec's window returns the first id.
func TestUniqueKeyCarried(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 30*time.Second)
		c := newClient(t, b)
		d := queueDef(t, false, time.Minute, 3)
		d.Dedupe = time.Hour
		q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
		id, err := q.Enqueue(ctx, 1, lockrt.Unique("order-1"))
		if err != nil {
			t.Fatal(err)
		}
		if again, err := q.Enqueue(ctx, 2, lockrt.Unique("order-1")); err != nil || again != id {
			t.Fatalf("Unique again: %q, %v; want %q", again, err, id)
		}
		raw, err := c.Redis().HGet(ctx, q.Key()+":data", id).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if _, fields, payload, err := lockrt.SplitItem(raw); err != nil || fields[lockrt.UniqueKeyField] != "order-1" || string(payload) != "1" {
			t.Fatalf("stored item: fields %v, payload %q, %v", fields, payload, err)
		}
		if _, err := q.Enqueue(ctx, 3, lockrt.WithKey("order-2", time.Minute)); err != nil {
			t.Fatal(err)
		}
		if ok, err := q.Remove(ctx, 3); err != nil || !ok {
			t.Fatalf("Remove of an item with a key: %v, %v", ok, err)
		}
		dl, err := q.TryTake(ctx, 0)
		if err != nil || dl.Value != 1 || dl.UniqueKey() != "order-1" {
			t.Fatalf("took %v (%v), want 1 with its key", dl, err)
		}
		if err := dl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Offer(ctx, 4); err != nil {
			t.Fatal(err)
		}
		if dl, err := q.TryTake(ctx, 0); err != nil || dl.UniqueKey() != "" {
			t.Fatalf("an item without a key: %v, %v", dl, err)
		}
	})
}

// TestQueueRetention: a queue with retention keeps its acknowledged
// items, newest first, at most max, for the window; an Ack costs exactly
// five commands more than without retention (INFO commandstats of a node
// of the test's own).
func TestQueueRetention(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 30*time.Second)
	node := ownClient(t)
	c := lockrt.New(node)
	defer c.Close()
	kept := queueDef(t, false, time.Minute, 3)
	kept.Retention, kept.RetainMax = time.Hour, 3
	q := lockrt.NewReliableQueue(c, kept, lockrt.JSON[int]{}, key(t, "kept"))
	plain := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 3), lockrt.JSON[int]{}, key(t, "plain"))
	if err := c.Preload(ctx, kept.Scripts.Offer, kept.Scripts.Take, kept.Scripts.Ack, kept.Scripts.Nack); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := q.Offer(ctx, i); err != nil {
			t.Fatal(err)
		}
		if _, err := plain.Offer(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	d, err := q.TryTake(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Nack(ctx, errors.New("again")); err != nil { // item 1 comes back as attempt 2, last
		t.Fatal(err)
	}
	check := commandCheck(t, []*redis.Client{node})
	ack := func(q *lockrt.ReliableQueue[int]) func() error {
		return func() error {
			d, err := q.TryTake(ctx, 0)
			if err != nil {
				return err
			}
			return d.Ack(ctx)
		}
	}
	// A TryTake and an Ack of a first delivery: the claim's HMGET of the
	// body, the Ack's HGET of the delivery count and its two HDELs (body,
	// count; a first delivery has no reason); with retention, the Ack's
	// HGET of the body, LPUSH, LTRIM and PEXPIRE, and its TIME (not
	// counted here: the delay timer's move, which the claim announces,
	// reads TIME too).
	check("Ack without retention", ack(plain), map[string]int64{"hmget": 1, "hget": 1, "hdel": 2, "zrem": 1, "lpush": 0, "ltrim": 0, "pexpire": 0})
	check("Ack with retention", ack(q), map[string]int64{"hmget": 1, "hget": 2, "hdel": 2, "zrem": 1, "lpush": 1, "ltrim": 1, "pexpire": 1})
	for range 4 {
		if err := ack(q)(); err != nil {
			t.Fatal(err)
		}
	}
	done, err := q.Completed(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range done {
		got = append(got, fmt.Sprintf("%d#%d", it.Value, it.Attempt))
		if it.DecodeErr != nil || it.ID == "" || time.Since(it.Done) > time.Minute {
			t.Errorf("completed item %+v", it)
		}
	}
	if want := []string{"1#2", "5#1", "4#1"}; !slices.Equal(got, want) {
		t.Fatalf("completed %v, want %v (newest first, at most 3)", got, want)
	}
	if _, err := plain.Completed(ctx, 10); !errors.Is(err, lockrt.ErrInvalidArgument) {
		t.Fatalf("Completed without retention: %v", err)
	}

	// The window: items older than it are not shown, and the list expires.
	short := queueDef(t, false, time.Minute, 3)
	short.Retention, short.RetainMax = 200*time.Millisecond, 10
	sq := lockrt.NewReliableQueue(c, short, lockrt.JSON[int]{}, key(t, "short"))
	if _, err := sq.Offer(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := ack(sq)(); err != nil {
		t.Fatal(err)
	}
	if done, err := sq.Completed(ctx, 10); err != nil || len(done) != 1 {
		t.Fatalf("completed %v, %v; want 1", done, err)
	}
	time.Sleep(2 * short.Retention) // the window, twice
	if done, err := sq.Completed(ctx, 10); err != nil || len(done) != 0 {
		t.Fatalf("completed past the window %v, %v; want none", done, err)
	}
	if n, err := node.Exists(ctx, sq.Key()+":done").Result(); err != nil || n != 0 {
		t.Fatalf("the done list outlived its window: %d, %v", n, err)
	}
}

// TestRetentionLostAck: an Ack with retention whose reply was lost keeps
// the item once, not twice (the Ack sent again finds it settled).
func TestRetentionLostAck(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 30*time.Second)
		c, l, _ := lossyClient(t, b)
		d := queueDef(t, false, time.Minute, 3)
		d.Retention, d.RetainMax = time.Hour, 10
		q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
		if _, err := q.Offer(ctx, 1); err != nil {
			t.Fatal(err)
		}
		dl, err := q.TryTake(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		l.lose(d.Scripts.Ack.SHA1, 1)
		if err := dl.Ack(ctx); err != nil {
			t.Fatalf("Ack with its reply lost: %v", err)
		}
		mustLose(t, l)
		done, err := q.Completed(ctx, 10)
		if err != nil || len(done) != 1 || done[0].Value != 1 || done[0].ID != dl.ID() {
			t.Fatalf("completed %+v, %v; want the item once", done, err)
		}
	})
}

// TestAckAllRetention: AckAll on a queue with retention keeps every
// acknowledged item done, as Ack does one by one.
func TestAckAllRetention(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		d := queueDef(t, false, time.Minute, 3)
		d.Retention, d.RetainMax = time.Hour, 10
		q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
		for i := 1; i <= 3; i++ {
			if _, err := q.Offer(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
		ds, err := q.TryTakeN(ctx, 3, 0)
		if err != nil || len(ds) != 3 {
			t.Fatalf("TryTakeN: %d, %v", len(ds), err)
		}
		if err := q.AckAll(ctx, ds...); err != nil {
			t.Fatal(err)
		}
		done, err := q.Completed(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(done) != 3 {
			t.Fatalf("%d completed items after AckAll of 3, want 3", len(done))
		}
	})
}
