package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestFencedTokens: 10k acquisitions (2k in `make test`: see volume) of
// one fenced lock by 4 clients (2 goroutines each) see strictly
// increasing tokens, in the order of their critical sections; meanwhile
// the lock's key is deleted under a holder now and then, and the tokens
// keep increasing.
func TestFencedTokens(t *testing.T) {
	const clients, goroutines = 4, 2
	total := volume(10000, 1000)
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
		// A fixed lease: fresh's must last to its Unlock, on a loaded
		// machine too.
		// Its wait covers a waiter's client finding the end of a hold it
		// registered behind with at most HandoffLease left at its next
		// refresh (LiveRegistryTTL/3), as a loaded machine may make it.
		d := def(t, lockrt.Fenced, time.Second, false, lockrt.LiveRegistryTTL/3+5*time.Second)

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

// TestFenceReset: a Redis killed and restarted empty restarts a fenced
// lock's counter; the client that saw tokens 1..3 before gets
// ErrFenceReset from the Lock that draws token 1 again, holding nothing,
// and then accepts the new counter. A client that saw no token before
// cannot tell.
func TestFenceReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := redistest.Single(t)
	d := def(t, lockrt.Fenced, 5*time.Second, true, 0)
	k := key(t)
	c := lockrt.New(n.Client())
	defer c.Close()
	l := c.Lock(d, k)
	for want := int64(1); want <= 3; want++ {
		le, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if le.Token() != want {
			t.Fatalf("token %d, want %d", le.Token(), want)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	le, err := l.Lock(ctx)
	if !errors.Is(err, lockrt.ErrFenceReset) {
		t.Fatalf("Lock after the empty restart: %v, %v; want ErrFenceReset", le, err)
	}
	t.Log(err)
	if held, err := l.IsLocked(ctx); err != nil || held {
		t.Fatalf("after ErrFenceReset the lock is held: %v, %v", held, err)
	}
	le, err = l.Lock(ctx)
	if err != nil {
		t.Fatalf("the Lock after ErrFenceReset: %v", err)
	}
	if le.Token() != 2 {
		t.Fatalf("token %d after the reset, want 2", le.Token())
	}
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Another process, which never saw this lock's tokens.
	other := lockrt.New(n.Client())
	defer other.Close()
	le, err = other.Lock(d, k).Lock(ctx)
	if err != nil || le.Token() != 3 {
		t.Fatalf("a new client: %v, %v; want token 3", le, err)
	}
	le.Unlock(ctx)
}

// TestFenceResetHandOff: a fenced lock that a release hands to a waiter
// is checked like one its acquire took: after Redis restarted empty, the
// hand-off's token (2) is not larger than the 3 the waiter's client saw,
// so its Lock returns ErrFenceReset and the lock is given back; the next
// Lock gets a larger token.
func TestFenceResetHandOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := redistest.Single(t)
	d := def(t, lockrt.Fenced, 5*time.Second, true, time.Minute)
	d.WaiterTTL = time.Minute // no refresh: the token comes with the hand-off
	k := key(t)
	c := lockrt.New(n.Client())
	defer c.Close()
	l := c.Lock(d, k)
	for range 3 {
		le, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	h := lockrt.New(n.Client())
	defer h.Close()
	held, err := h.Lock(d, k).Lock(ctx)
	if err != nil || held.Token() != 1 {
		t.Fatalf("the holder after the restart: %v, %v; want token 1", held, err)
	}
	got := make(chan error, 1)
	go func() {
		le, err := l.Lock(ctx)
		if err == nil {
			err = fmt.Errorf("the hand-off was accepted with token %d", le.Token())
			le.Unlock(ctx)
		}
		got <- err
	}()
	waitRegistered(t, n.Client(), k, 1)
	waitSubscribed(t, n.Client(), lockrt.WakeChannel(c, k))
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, lockrt.ErrFenceReset) {
		t.Fatalf("the waiter handed token 2 after seeing 3: %v; want ErrFenceReset", err)
	} else {
		t.Log(err)
	}
	if locked, err := l.IsLocked(ctx); err != nil || locked {
		t.Fatalf("after ErrFenceReset the lock is held: %v, %v", locked, err)
	}
	le, err := l.Lock(ctx)
	if err != nil || le.Token() != 3 {
		t.Fatalf("the Lock after ErrFenceReset: %v, %v; want token 3", le, err)
	}
	le.Unlock(ctx)
}
