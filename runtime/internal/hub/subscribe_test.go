package hub

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestSubscribeMany: channels subscribed together are confirmed by the
// server when the call returns (PUBSUB NUMSUB counts each, and a message
// published on each reaches its watcher), a channel subscribed twice
// holds two references, and a closed hub answers impl.ErrClosed for
// every channel.
func TestSubscribeMany(t *testing.T) {
	n := redistest.Single(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer rdb.Close()
	h := New(rdb, false)
	defer h.Close()

	channels := []string{"many:a", "many:b", "many:c", "many:a"}
	subs, errs := h.SubscribeMany(ctx, channels)
	got := make(chan string, len(channels))
	for i, s := range subs {
		if errs[i] != nil {
			t.Fatalf("%s: %v", channels[i], errs[i])
		}
		if !h.isReady(s) {
			t.Fatalf("%s: not confirmed when SubscribeMany returned", channels[i])
		}
		if i < 3 {
			h.Watch(s, func(payload string) { got <- payload })
		}
	}
	if subs[0] != subs[3] || subs[0].refs != 2 {
		t.Fatalf("a channel subscribed twice: %p and %p, %d references; want one subscription, 2", subs[0], subs[3], subs[0].refs)
	}
	counts, err := rdb.PubSubNumSub(ctx, channels[:3]...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range channels[:3] {
		if counts[ch] != 1 {
			t.Fatalf("PUBSUB NUMSUB %s = %d, want 1", ch, counts[ch])
		}
		if err := rdb.Publish(ctx, ch, "to "+ch).Err(); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for range 3 {
		select {
		case p := <-got:
			seen[p] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("messages delivered: %v", seen)
		}
	}
	for _, ch := range channels[:3] {
		if !seen["to "+ch] {
			t.Fatalf("no message on %s: %v", ch, seen)
		}
	}

	h.Close()
	_, errs = h.SubscribeMany(ctx, []string{"many:d", "many:e"})
	for i, err := range errs {
		if !errors.Is(err, impl.ErrClosed) {
			t.Fatalf("channel %d after Close: %v, want ErrClosed", i, err)
		}
	}
}
