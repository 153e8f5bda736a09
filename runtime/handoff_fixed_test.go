package runtime_test

import (
	"context"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestFixedLeaseHandoff: a release of a simple, reentrant or fenced lock
// the watchdog does not renew hands it on with the spec's lease, told in
// the message: the woken waiter holds it without one more script (before,
// it extended the hand-off's one second to its lease with one), for the
// lease: its key's TTL in Redis and its context's deadline.
func TestFixedLeaseHandoff(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, kind := range []lockrt.LockKind{lockrt.Simple, lockrt.Reentrant, lockrt.Fenced} {
			t.Run(kind.String(), func(t *testing.T) {
				ctx := context.Background()
				const lease = 20 * time.Second
				d := def(t, kind, lease, false, time.Minute)
				k := key(t)
				a, w := newClient(t, b), newClient(t, b)
				la, err := a.Lock(d, k).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				scripts := countScripts(w)
				got := inBackground(t, func() (*lockrt.Lease, error) { return w.Lock(d, k).Lock(ctx) })
				waitWaiting(t, w, k, 1, 1)
				waitSettled(t, []*evalCounter{scripts})
				before := scripts.n.Load()
				if err := la.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				var lw *lockrt.Lease
				select {
				case lw = <-got:
				case <-time.After(failAfter):
					t.Fatal("the waiter did not get the lock")
				}
				if n := scripts.n.Load() - before; n != 0 {
					t.Errorf("the waiter ran %d scripts after the release, want 0", n)
				}
				if ttl := w.Redis().PTTL(ctx, k).Val(); ttl < lease/2 {
					t.Errorf("the handed lock's TTL in Redis: %v, want its lease %v", ttl, lease)
				}
				if dl, ok := lw.Context().Deadline(); !ok || time.Until(dl) < lease/2 {
					t.Errorf("the handed lease's deadline is %v away, want about %v", time.Until(dl), lease)
				}
				if err := lw.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}
