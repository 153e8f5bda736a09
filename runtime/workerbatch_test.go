package runtime_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestWorkerClaimsTogether: a worker's idle workers take together: with 8
// workers idle and 20 items ready, at most 2 claims (one take script each:
// a worker keeps one claim per 8 workers, and one more may start as the
// first returns) hand 8 items out, one to each;
// every item is handled and acknowledged.
func TestWorkerClaimsTogether(t *testing.T) {
	t.Parallel()
	const workers, items = 8, 20
	ctx := withTimeout(t, time.Minute)
	c := lockrt.New(ownClient(t))
	defer c.Close()
	d := queueDef(t, false, time.Minute, 3)
	if err := c.Preload(ctx, d.Scripts.Offer, d.Scripts.Take, d.Scripts.Ack, d.Scripts.Move, d.Scripts.Wait); err != nil {
		t.Fatal(err)
	}
	q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
	vs := make([]int, items)
	for i := range vs {
		vs[i] = i
	}
	if _, err := q.OfferMany(ctx, vs...); err != nil {
		t.Fatal(err)
	}
	h := &cmdLog{}
	c.Redis().AddHook(h)
	release := make(chan struct{})
	var running, done atomic.Int32
	stop := serve(t, q, func(context.Context, int) error {
		running.Add(1)
		<-release
		done.Add(1)
		return nil
	}, lockrt.WithConcurrency(workers))
	until(t, func() bool { return running.Load() == workers })
	claims := 0
	for _, cmd := range h.take() {
		if strings.Contains(cmd, d.Scripts.Take.SHA1) {
			claims++
		}
	}
	if claims < 1 || claims > 2 {
		t.Errorf("%d idle workers took %d items in %d claims, want 1 or 2", workers, workers, claims)
	}
	close(release)
	until(t, func() bool { return done.Load() == items })
	until(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight == 0 && st.Ready == 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
