package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// The calls of issue 30 item 5: what Redisson users miss.

// TestItemTooLarge: an offer of an item above the client's limit returns
// ErrItemTooLarge naming the size and the limit, for every kind of offer,
// and sends nothing: no key of the queue exists, and no item of a batch
// with one too large was added.
func TestItemTooLarge(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 20*time.Second)
	rdb := backends()[0].new()
	t.Cleanup(func() { rdb.Close() })
	log := &cmdLog{}
	rdb.AddHook(log)
	const limit = 64
	c := lockrt.New(rdb, lockrt.WithMaxItemSize(limit))
	t.Cleanup(func() { c.Close() })
	big, small := strings.Repeat("x", 2*limit), "ok"

	pk, rk := key(t, "plain"), key(t, "reliable")
	plain := lockrt.NewDelayedQueue(c, queueDef(t, true, 0, 0), lockrt.JSON[string]{}, pk)
	rel := lockrt.NewDelayedReliableQueue(c, queueDef(t, true, time.Minute, 3), lockrt.JSON[string]{}, rk)
	calls := map[string]func() error{
		"Queue.Offer":                  func() error { return plain.Offer(ctx, big) },
		"Queue.OfferMany":              func() error { return plain.OfferMany(ctx, small, big) },
		"DelayedQueue.OfferIn":         func() error { return plain.OfferIn(ctx, big, time.Hour) },
		"DelayedQueue.OfferAt":         func() error { return plain.OfferAt(ctx, big, time.Now().Add(time.Hour)) },
		"ReliableQueue.Offer":          func() error { return errOnly(rel.Offer(ctx, big)) },
		"ReliableQueue.OfferMany":      func() error { return errOnly(rel.OfferMany(ctx, small, big, small)) },
		"ReliableQueue.Enqueue":        func() error { return errOnly(rel.Enqueue(ctx, big, lockrt.WithKey("k", time.Minute))) },
		"DelayedReliableQueue.OfferIn": func() error { return errOnly(rel.OfferIn(ctx, big, time.Hour)) },
		"DelayedReliableQueue.OfferAt": func() error { return errOnly(rel.OfferAt(ctx, big, time.Now().Add(time.Hour))) },
	}
	log.take()
	for name, call := range calls {
		err := call()
		if !errors.Is(err, lockrt.ErrItemTooLarge) {
			t.Errorf("%s of an item of %d bytes: err = %v, want ErrItemTooLarge", name, len(big), err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "limit is 64") || !strings.Contains(msg, " bytes") {
			t.Errorf("%s: %q does not name the size and the limit", name, msg)
		}
	}
	if cmds := log.take(); len(cmds) != 0 {
		t.Errorf("refused offers sent %v", cmds)
	}
	for _, k := range []string{pk, rk} {
		if n, err := rdb.Keys(ctx, k+"*").Result(); err != nil || len(n) != 0 {
			t.Errorf("keys of %s after refused offers: %v, %v; want none", k, n, err)
		}
	}
	// Items within the limit still go.
	if err := plain.OfferMany(ctx, small, small); err != nil {
		t.Fatal(err)
	}
	if _, err := rel.OfferIn(ctx, small, time.Hour); err != nil {
		t.Fatal(err)
	}
	if st, err := rel.Stats(ctx); err != nil || st.Delayed != 1 {
		t.Errorf("reliable queue after a good offer: %+v, %v; want 1 delayed", st, err)
	}
	if n, err := plain.Len(ctx); err != nil || n != 2 {
		t.Errorf("plain queue after a good offer: %d, %v; want 2", n, err)
	}
}

// TestDefaultMaxItemSize: without WithMaxItemSize the limit is Redis'
// proto-max-bulk-len, 512 MB.
func TestDefaultMaxItemSize(t *testing.T) {
	if lockrt.DefaultMaxItemSize != 512*1024*1024 {
		t.Errorf("DefaultMaxItemSize = %d, want 512 MB", lockrt.DefaultMaxItemSize)
	}
	_ = context.Background
	_ = redis.Nil
}
