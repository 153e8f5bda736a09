package rdb

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestLaneWithin: a call whose wait ends while it is queued behind the
// lane's two flights is withdrawn and never runs; one whose wait ends in
// flight returns false at once, runs, and its late function gets its
// reply. Redis is paused (CLIENT PAUSE WRITE, until CLIENT UNPAUSE) so
// that the flights stay in the air; the test waits on the lane's own
// state, not on time.
func TestLaneWithin(t *testing.T) {
	n := redistest.Single(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rdb.Close()
	admin := n.Client()
	// Connections made before the pause, for both flights.
	for range 2 {
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var l Lane
	// settled waits until the lane holds no queued call and flights in
	// flight; queued until it holds n queued calls.
	lane := func(cond func() bool) bool {
		return redistest.Within(10*time.Second, func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return cond()
		})
	}
	settled := func(flights int) {
		t.Helper()
		if !lane(func() bool { return len(l.queue) == 0 && l.flights == flights }) {
			t.Fatalf("the lane did not send its calls (%d flights wanted)", flights)
		}
	}
	queued := func(n int) {
		t.Helper()
		if !lane(func() bool { return len(l.queue) == n }) {
			t.Fatalf("not %d calls queued", n)
		}
	}
	// Paused until the test unpauses it (CLIENT UNPAUSE), however slow
	// the machine: the flights stay in the air until then.
	if err := admin.Do(ctx, "client", "pause", 60000, "write").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(context.Background(), "client", "unpause")

	// A: in flight when its wait ends.
	actx, cancelA := context.WithCancel(ctx)
	a := redis.NewIntCmd(ctx, "incr", "k")
	late := make(chan *redis.IntCmd, 1)
	aok := make(chan bool, 1)
	go func() { aok <- l.DoWithinOr(ctx, actx, rdb, a, func() { late <- a }) }()
	settled(1)
	// B: the second flight, waiting as long as it takes.
	b := redis.NewIntCmd(ctx, "incr", "k")
	bdone := make(chan struct{})
	go func() { l.Do(ctx, rdb, b); close(bdone) }()
	settled(2)
	// C: queued behind both, its wait ends there.
	cctx, cancelC := context.WithCancel(ctx)
	c := redis.NewIntCmd(ctx, "incr", "k")
	cok := make(chan bool, 1)
	go func() {
		cok <- l.DoWithinOr(ctx, cctx, rdb, c, func() { t.Error("a withdrawn call's late function ran") })
	}()
	queued(1)
	cancelC()
	if <-cok {
		t.Fatal("a queued call whose wait ended reported its reply")
	}
	queued(0)
	cancelA()
	if <-aok {
		t.Fatal("a call in flight whose wait ended reported its reply")
	}

	// The pause ends: A and B run, A's reply goes to its late function.
	if err := admin.Do(ctx, "client", "unpause").Err(); err != nil {
		t.Fatal(err)
	}
	<-bdone
	select {
	case got := <-late:
		if v, err := got.Result(); err != nil || (v != 1 && v != 2) {
			t.Fatalf("late reply %d, %v; want 1 or 2", v, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late function did not run")
	}
	if v, err := b.Result(); err != nil || (v != 1 && v != 2) {
		t.Fatalf("B's reply %d, %v; want 1 or 2", v, err)
	}
	settled(0)
	if v, err := admin.Get(ctx, "k").Int(); err != nil || v != 2 {
		t.Fatalf("k = %d (%v): want 2, the withdrawn call never sent", v, err)
	}
}
