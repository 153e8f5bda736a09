package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestFencedTokens: 10k acquisitions of one fenced lock by 4 clients (2
// goroutines each) see strictly increasing tokens, in the order of their
// critical sections; meanwhile the lock's key is deleted under a holder
// now and then, and the tokens keep increasing.
func TestFencedTokens(t *testing.T) {
	const clients, goroutines = 4, 2
	total := 10000
	if testing.Short() {
		total = 1000
	}
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.Fenced, 5*time.Second, true, time.Minute)
		k := key(t)
		var (
			mu        sync.Mutex
			last      int64
			count     int
			deletions int
			wg        sync.WaitGroup
		)
		per := total / (clients * goroutines)
		for range clients {
			c := newClient(t, b)
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						le, err := c.Lock(d, k).Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						tok := le.Token()
						mu.Lock()
						if tok <= last {
							t.Errorf("token %d after %d", tok, last)
						}
						last = tok
						count++
						del := count%1000 == 0
						if del {
							deletions++
						}
						mu.Unlock()
						if del {
							// The key goes; the fence counter stays.
							if err := c.Redis().Del(ctx, k).Err(); err != nil {
								t.Error(err)
							}
							le.Unlock(ctx) // ErrNotHeld: the key is gone
							continue
						}
						if err := le.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		if count != per*clients*goroutines || deletions == 0 {
			t.Fatalf("%d acquisitions (%d with the key deleted), want %d", count, deletions, per*clients*goroutines)
		}
		t.Logf("%d acquisitions, last token %d", count, last)
	})
}

// TestFencedStaleHolder: a holder whose fixed lease ran out keeps its
// token; the next holder's is larger and storage refuses the stale one's
// late write. Re-entry keeps the hold's token.
func TestFencedStaleHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		k := key(t)
		record := key(t, "record")
		slow, fast := newClient(t, b), newClient(t, b)
		d := def(t, lockrt.Fenced, 300*time.Millisecond, false, 5*time.Second)

		stale, err := slow.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again, err := slow.Lock(d, k).Lock(stale.Context())
		if err != nil {
			t.Fatal(err)
		}
		if again.Token() != stale.Token() || stale.Token() <= 0 {
			t.Fatalf("re-entry token %d, hold token %d; want equal and positive", again.Token(), stale.Token())
		}
		if err := store(ctx, slow.Redis(), record, stale.Token(), "first"); err != nil {
			t.Fatal(err)
		}
		// The slow holder pauses past its lease; fast waits for it.
		fresh, err := fast.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fresh.Token() <= stale.Token() {
			t.Fatalf("token after expiry %d, stale holder's %d", fresh.Token(), stale.Token())
		}
		if err := store(ctx, fast.Redis(), record, fresh.Token(), "second"); err != nil {
			t.Fatal(err)
		}
		if err := store(ctx, slow.Redis(), record, stale.Token(), "late"); !errors.Is(err, errStale) {
			t.Fatalf("stale write: err = %v, want errStale", err)
		}
		if v, _ := slow.Redis().HGet(ctx, record, "value").Result(); v != "second" {
			t.Fatalf("record = %q, want second", v)
		}
		if !errors.Is(context.Cause(stale.Context()), lockrt.ErrLockLost) {
			t.Fatalf("stale lease's cause = %v, want ErrLockLost", context.Cause(stale.Context()))
		}
		if err := fresh.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// Deleted from outside while free, and expired: still increasing.
		if err := fast.Redis().Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
		next, err := slow.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if next.Token() <= fresh.Token() {
			t.Fatalf("token %d after %d", next.Token(), fresh.Token())
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// Other kinds have no token.
		le, err := slow.Lock(def(t, lockrt.Reentrant, time.Second, false, 0), key(t, "plain")).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if le.Token() != 0 {
			t.Fatalf("reentrant lock token = %d, want 0", le.Token())
		}
		le.Unlock(ctx)
	})
}
