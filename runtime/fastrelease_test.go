package runtime_test

import (
	"context"
	"slices"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestFastReleaseHandsOn: a hold the acquire's fast path took is released
// with the lock's key alone (one call, KEYS 1), also when it was
// re-entered; when a waiter registered meanwhile, that call changes
// nothing and the release is sent again with the registry's keys, which
// hands the lock to the waiter (two calls, KEYS 1 then 3). A hold that
// was handed is released whole at once. Reentrant and simple locks, one
// node and a cluster.
func TestFastReleaseHandsOn(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, kind := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Simple} {
			t.Run(kind.String(), func(t *testing.T) {
				ctx := context.Background()
				d := def(t, kind, 30*time.Second, true, 10*time.Second)
				k := key(t)
				h := newContractHook(t)
				rdb := b.new()
				rdb.AddHook(h)
				holder := lockrt.New(rdb)
				t.Cleanup(func() {
					holder.Close()
					rdb.Close()
				})
				want := func(what string, keys ...int) {
					t.Helper()
					if got := h.keysSince(d.Scripts.Release.Name); !slices.Equal(got, keys) {
						t.Fatalf("%s: release calls with KEYS %v, want %v", what, got, keys)
					}
				}
				l := holder.Lock(d, k)

				le, err := l.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := le.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				want("uncontended", 1)

				if kind == lockrt.Reentrant {
					outer, err := l.Lock(ctx)
					if err != nil {
						t.Fatal(err)
					}
					inner, err := l.Lock(outer.Context())
					if err != nil {
						t.Fatal(err)
					}
					if err := outer.Unlock(ctx); err != nil { // the fast hold, with one hold left
						t.Fatal(err)
					}
					want("re-entered", 1)
					if n, err := l.HoldCount(context.WithoutCancel(inner.Context())); err != nil || n != 1 {
						t.Fatalf("holds left after the fast hold's release: %d, %v; want 1", n, err)
					}
					if err := inner.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
					want("re-entry", 3)
				}

				le, err = l.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				waiter := newClient(t, b).Lock(d, k)
				got := inBackground(t, func() (*lockrt.Lease, error) { return waiter.Lock(ctx) })
				waitRegistered(t, rdb, k, 1)
				if err := le.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				want("a waiter due the lock", 1, 3)
				var wl *lockrt.Lease
				select {
				case wl = <-got:
				case <-time.After(5 * time.Second):
					t.Fatal("the waiter was not handed the lock")
				}
				if wl == nil {
					t.FailNow()
				}
				if ok, err := wl.IsHeld(ctx); err != nil || !ok {
					t.Fatalf("the waiter's lease: held %v, %v", ok, err)
				}
				// Now the holder waits, and the waiter's hold (handed) is
				// released whole at once.
				back := inBackground(t, func() (*lockrt.Lease, error) { return l.Lock(ctx) })
				waitRegistered(t, rdb, k, 1)
				if err := wl.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				bl := <-back
				if bl == nil {
					t.FailNow()
				}
				if err := bl.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				want("the handed hold's hand-back, then the holder's handed hold", 3)
			})
		}
	})
}
