package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestHoldCount: HoldCount and IsHeldBy read the holds of the owner in a
// context, and Lease.IsHeld whether a lease still holds its lock, for
// every lock kind.
func TestHoldCount(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		bg := context.Background()
		c := newClient(t, b)
		for kind, l := range lockKinds(t, c, time.Minute) {
			count := func(ctx context.Context, want int) {
				t.Helper()
				if n, err := l.HoldCount(ctx); err != nil || n != want {
					t.Errorf("%s: HoldCount = %d, %v; want %d", kind, n, err, want)
				}
				if held, err := l.IsHeldBy(ctx); err != nil || held != (want > 0) {
					t.Errorf("%s: IsHeldBy = %v, %v; want %v", kind, held, err, want > 0)
				}
			}
			count(bg, 0)
			le1, err := l.Lock(bg)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			count(le1.Context(), 1)
			count(bg, 0)
			depth := 1
			var le2 *lockrt.Lease
			if kind != "simple" {
				if le2, err = l.Lock(le1.Context()); err != nil {
					t.Fatalf("%s: re-entry: %v", kind, err)
				}
				depth = 2
			}
			count(le1.Context(), depth)
			if held, err := le1.IsHeld(bg); err != nil || !held {
				t.Errorf("%s: IsHeld = %v, %v; want true", kind, held, err)
			}
			if le2 != nil {
				if err := le2.Unlock(bg); err != nil {
					t.Fatal(err)
				}
				count(le1.Context(), 1)
			}
			if err := le1.Unlock(bg); err != nil {
				t.Fatal(err)
			}
			count(context.WithoutCancel(le1.Context()), 0) // the ended context still names the owner
			if held, err := le1.IsHeld(bg); err != nil || held {
				t.Errorf("%s: IsHeld after Unlock = %v, %v; want false", kind, held, err)
			}
			// A lease whose lock was taken away no longer holds it, even
			// before the watchdog noticed.
			le, err := l.Lock(bg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.ForceUnlock(bg); err != nil {
				t.Fatal(err)
			}
			if held, err := le.IsHeld(bg); err != nil || held {
				t.Errorf("%s: IsHeld after ForceUnlock = %v, %v; want false", kind, held, err)
			}
			_ = le.Unlock(bg)
		}
	})
}

// TestWithLease: a per-call lease replaces the spec's for that hold: its
// TTL in Redis, its renewal, its local deadline; a semaphore's permits
// taken with a short lease come back after it. A lease of 0 is
// ErrInvalidArgument.
func TestWithLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		bg := context.Background()
		c := newClient(t, b)
		const short = 600 * time.Millisecond
		for _, renew := range []bool{true, false} {
			l := c.Lock(def(t, lockrt.Reentrant, time.Minute, renew, 0), key(t, strconv.FormatBool(renew)))
			le, err := l.Lock(bg, lockrt.WithLease(short))
			if err != nil {
				t.Fatal(err)
			}
			if le.Lease() != short {
				t.Errorf("Lease() = %v, want %v", le.Lease(), short)
			}
			if ttl, err := l.TTL(bg); err != nil || ttl <= 0 || ttl > short {
				t.Errorf("renew %v: TTL %v (%v), want at most %v", renew, ttl, err, short)
			}
			if d, ok := le.Context().Deadline(); !ok || time.Until(d) > short {
				t.Errorf("renew %v: lease deadline in %v, want at most %v", renew, time.Until(d), short)
			}
			time.Sleep(2 * short)
			ttl, _ := l.TTL(bg)
			switch {
			case renew && (le.Context().Err() != nil || ttl <= 0 || ttl > short):
				t.Errorf("renewed with its own lease: context %v, TTL %v", le.Context().Err(), ttl)
			case !renew && (ttl > 0 || !errors.Is(context.Cause(le.Context()), lockrt.ErrLockLost)):
				t.Errorf("fixed short lease: TTL %v and cause %v after it", ttl, context.Cause(le.Context()))
			}
			_ = le.Unlock(bg)
			if _, err := l.Lock(bg, lockrt.WithLease(0)); !errors.Is(err, lockrt.ErrInvalidArgument) {
				t.Errorf("WithLease(0): %v, want ErrInvalidArgument", err)
			}
		}
		s := c.Semaphore(semDef(t, 2, time.Minute, false, 0), key(t, "sem"))
		const permitLease = 300 * time.Millisecond
		if _, err := s.Acquire(bg, 2, lockrt.WithLease(permitLease)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * permitLease) // the permits' lease runs out
		if n, err := s.Available(bg); err != nil || n != 2 {
			t.Errorf("%d permits available after a 300ms permit lease ran out (%v), want 2", n, err)
		}
	})
}
