package runtime_test

import (
	"context"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestNoScriptOneExtraRoundTrip: after SCRIPT FLUSH, the first Lock and
// the first Unlock, whose EVALSHAs are answered NOSCRIPT, take one round
// trip more than the 1 each of an uncontended Lock and Unlock (README:
// "recovers from NOSCRIPT in one extra round trip"); the next Lock+Unlock
// takes 2 again. It runs on a redis-server of its own, so that its flush
// does not add round trips to other tests.
func TestNoScriptOneExtraRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, b := ownNode(t)
	rdb := b.new()
	defer rdb.Close()
	c := lockrt.New(rdb)
	defer c.Close()
	d := def(t, lockrt.Reentrant, 5*time.Second, true, 0)
	s := d.Scripts
	if err := c.Preload(ctx, s.Acquire, s.Release, s.Renew, s.ForceUnlock); err != nil {
		t.Fatal(err)
	}
	if err := n.Client().ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h := &countHook{}
	rdb.AddHook(h)
	le, err := c.Lock(d, key(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.n.Load(); got != 2 {
		t.Errorf("Lock after SCRIPT FLUSH: %d round trips, want 2 (EVALSHA answered NOSCRIPT, then the script sent again)", got)
	}
	h.n.Store(0)
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.n.Load(); got != 2 {
		t.Errorf("Unlock after SCRIPT FLUSH: %d round trips, want 2", got)
	}
	h.n.Store(0)
	if le, err = c.Lock(d, key(t)).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.n.Load(); got != 2 {
		t.Errorf("the next Lock+Unlock: %d round trips, want 2", got)
	}
}

// TestNoScriptLanes: the calls a client sends in its lanes (a plain
// queue's Offer, and TryTake's pop, under a context with a deadline: the
// bounded lane path) recover from NOSCRIPT as a Lock does, the script
// sent again in the lane: one round trip more, and the item offered and
// taken once.
func TestNoScriptLanes(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	rdb := b.new()
	defer rdb.Close()
	c := lockrt.New(rdb)
	defer c.Close()
	q := lockrt.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, key(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := q.Offer(ctx, 0); err != nil { // the scripts loaded
		t.Fatal(err)
	}
	if _, err := q.TryTake(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := n.Client().ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h := &countHook{}
	rdb.AddHook(h)
	if err := q.Offer(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if got := h.n.Load(); got != 2 {
		t.Errorf("Offer after SCRIPT FLUSH: %d round trips, want 2", got)
	}
	h.n.Store(0)
	v, err := q.TryTake(ctx, 0)
	if err != nil || v != 7 {
		t.Fatalf("TryTake after SCRIPT FLUSH = %d, %v; want 7", v, err)
	}
	if got := h.n.Load(); got != 2 {
		t.Errorf("TryTake after SCRIPT FLUSH: %d round trips, want 2", got)
	}
	if l, err := q.Len(ctx); err != nil || l != 0 {
		t.Fatalf("Len = %d, %v; want 0", l, err)
	}
}
