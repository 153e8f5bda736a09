package otel_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockotel "github.com/lockgen/lockgen/adapters/otel"
	"github.com/lockgen/lockgen/examples/ops/shopops"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestWaitFallbackSpanEvent: a Lock whose holder's key vanishes without a
// release (as when the holder stopped and its lease ran out) is taken by
// the waiter's fallback timer, and its span carries a
// "lockgen.wait-fallback" event with the object and the wait; a Lock
// woken by a release carries none.
func TestWaitFallbackSpanEvent(t *testing.T) {
	e := newEnv(t)
	rdb, rec := e.rdb, e.rec
	other := e.client(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	lockAfter := func(id int64, free func(*lockrt.Lease, string)) {
		t.Helper()
		held := shopops.NewLocks(other).Order(id)
		le, err := held.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The waiter: a client of its own, whose scripts are counted.
		wrdb := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
		defer wrdb.Close()
		scripts := redistest.NewCounter() // (each command counted once answered)
		wrdb.AddHook(scripts)
		rt := lockrt.New(wrdb, lockrt.WithObserver(lockotel.New(e.tp)))
		defer rt.Close()
		got := make(chan error, 1)
		go func() {
			mine, err := shopops.NewLocks(rt).Order(id).Lock(ctx)
			if err == nil {
				err = mine.Unlock(ctx)
			}
			got <- err
		}()
		// Queued and subscribed, and past the look a new client's wait
		// takes once subscribed (a read of the lock and its entry; a
		// second script before): from then on only a wake-up or its
		// timer makes it try again.
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			chans, err := rdb.PubSubChannels(ctx, "*:"+rt.ID()).Result() // a waiter's wake-up channel: <prefix>:<clientID>
			looked := scripts.Count("zscore") > 0 || scripts.Scripts() >= 2
			if rdb.Exists(ctx, held.Key()+":queue").Val() == 1 && err == nil && len(chans) > 0 && looked {
				break
			}
			if time.Now().After(end) {
				t.Fatal("timed out waiting until the waiter is queued and subscribed")
			}
		}
		free(le, held.Key())
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	lockAfter(1, func(le *lockrt.Lease, _ string) { le.Unlock(ctx) })
	lockAfter(2, func(_ *lockrt.Lease, key string) { rdb.Del(ctx, key) })

	fallbacks := map[string]int{}
	for _, s := range rec.Ended() {
		for _, e := range s.Events() {
			if e.Name != "lockgen.wait-fallback" {
				continue
			}
			for _, kv := range e.Attributes {
				if kv.Key == "lockgen.object" {
					fallbacks[s.Name()+" "+kv.Value.AsString()]++
				}
			}
		}
	}
	if len(fallbacks) != 1 || fallbacks["lockgen.Lock Order"] != 1 {
		t.Errorf("wait-fallback span events by span and object: %v; want one, on the second Lock's span (lockgen.Lock, object Order)", fallbacks)
	}
}
