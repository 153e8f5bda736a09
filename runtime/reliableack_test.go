package runtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestAckAll: AckAll acknowledges a batch in one script whose commands do
// not grow with the batch (exact counts), passes over a delivery already
// acknowledged, reports one given back as settled while acknowledging
// the others, and completes once when its reply was lost.
func TestAckAll(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 30*time.Second)
	node := ownClient(t)
	c := lockrt.New(node)
	defer c.Close()
	d := queueDef(t, false, time.Minute, 3)
	if err := c.Preload(ctx, d.Scripts.Offer, d.Scripts.Take, d.Scripts.Ack, d.Scripts.Move); err != nil {
		t.Fatal(err)
	}
	q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
	if _, err := q.OfferMany(ctx, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9); err != nil {
		t.Fatal(err)
	}
	ds, err := q.TakeN(ctx, 10)
	if err != nil || len(ds) != 10 {
		t.Fatalf("TakeN: %d deliveries (%v), want 10", len(ds), err)
	}
	eventually(t, failAfter, func() bool { return !c.TimerMoving() }, "the delay timer kept moving")
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds[1].Nack(ctx, errors.New("no")); err != nil {
		t.Fatal(err)
	}
	check := commandCheck(t, []*redis.Client{node})
	// 6 first deliveries: EVALSHA, HMGET, ZMSCORE, ZREM, HDEL, HDEL.
	check("AckAll of 6", func() error { return q.AckAll(ctx, ds[2:8]...) },
		map[string]int64{"evalsha": 1, "hmget": 1, "zmscore": 1, "zrem": 1, "hdel": 2, "hget": 0, "zscore": 0})
	err = q.AckAll(ctx, ds...) // 0 acknowledged, 1 given back, 2-7 acknowledged
	if !errors.Is(err, lockrt.ErrDeliverySettled) || errors.Is(err, lockrt.ErrDeliveryExpired) {
		t.Fatalf("AckAll with a delivery given back: %v, want ErrDeliverySettled alone", err)
	}
	for _, i := range []int{8, 9} {
		if err := ds[i].Ack(ctx); err != nil { // acknowledged by the AckAll: a second Ack does nothing
			t.Fatalf("Ack of delivery %d after AckAll: %v", i, err)
		}
	}
	st, err := q.Stats(ctx)
	if err != nil || st.InFlight != 0 || st.Ready != 1 {
		t.Fatalf("stats %+v (%v), want none in flight and the given-back item ready", st, err)
	}
	if err := q.AckAll(ctx); err != nil {
		t.Fatalf("AckAll of none: %v", err)
	}
	other := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t, "other"))
	if err := other.AckAll(ctx, ds[0]); !errors.Is(err, lockrt.ErrInvalidArgument) {
		t.Fatalf("AckAll of another queue's delivery: %v, want ErrInvalidArgument", err)
	}
}

// TestAckAllLostReply: an AckAll whose reply was lost is sent again, and
// reports every delivery acknowledged, once.
func TestAckAllLostReply(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c, l, _ := lossyClient(t, b)
		ctx := withTimeout(t, 30*time.Second)
		d := queueDef(t, false, 10*time.Second, 3)
		q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
		if _, err := q.OfferMany(ctx, 1, 2, 3); err != nil {
			t.Fatal(err)
		}
		ds, err := q.TakeN(ctx, 3)
		if err != nil || len(ds) != 3 {
			t.Fatalf("TakeN: %d deliveries (%v), want 3", len(ds), err)
		}
		l.lose(d.Scripts.Ack.SHA1, 1)
		if err := q.AckAll(ctx, ds...); err != nil {
			t.Fatalf("AckAll whose reply was lost: %v", err)
		}
		mustLose(t, l)
		if st, err := q.Stats(ctx); err != nil || st.InFlight != 0 || st.Ready != 0 {
			t.Fatalf("stats %+v (%v), want nothing in flight or ready", st, err)
		}
	})
}
