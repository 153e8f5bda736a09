package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// sentinelBackend is a primary, a replica and a sentinel of the test's own,
// reached through go-redis failover clients.
func sentinelBackend(t *testing.T) (*redistest.Sentinel, backend) {
	s := redistest.NewSentinel(t)
	return s, backend{"sentinel", func() redis.UniversalClient {
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    s.MasterName,
			SentinelAddrs: []string{s.SentinelAddr},
		})
	}}
}

// TestSentinelLock: locking, re-entry, exclusion and the release message
// through a failover client, which finds the primary through the
// sentinel; the lock is replicated.
func TestSentinelLock(t *testing.T) {
	t.Parallel()
	s, b := sentinelBackend(t)

	t.Run("reentry", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		l := newClient(t, b).Lock(def(t, lockrt.Reentrant, 10*time.Second, true, 0), key(t))
		l1, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := l.Lock(l1.Context())
		if err != nil {
			t.Fatal(err)
		}
		// The lock's value is "<owner> <holds>", then the re-entry's
		// operation.
		if v, err := s.Primary.Client().Get(ctx, l.Key()).Result(); err != nil || len(strings.Fields(v)) < 2 || strings.Fields(v)[1] != "2" {
			t.Fatalf("primary: lock = %q, %v; want 2 holds", v, err)
		}
		other := newClient(t, b).Lock(def(t, lockrt.Reentrant, 10*time.Second, true, 0), l.Key())
		if _, err := other.TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("another client: err = %v, want ErrNotObtained", err)
		}
		// Replication is asynchronous: WAIT for the replica.
		if n, err := s.Primary.Client().Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
			t.Fatalf("WAIT 1 = %d, %v", n, err)
		}
		if v, err := s.Replica.Client().Get(ctx, l.Key()).Result(); err != nil || len(strings.Fields(v)) < 2 || strings.Fields(v)[1] != "2" {
			t.Fatalf("replica: lock = %q, %v; want 2 holds", v, err)
		}
		for i, le := range []*lockrt.Lease{l2, l1} {
			if err := le.Unlock(ctx); err != nil {
				t.Fatalf("unlock %d: %v", i, err)
			}
		}
		if locked, err := l.IsLocked(ctx); err != nil || locked {
			t.Fatalf("after full release: IsLocked = %v, %v", locked, err)
		}
	})

	t.Run("exclusion", func(t *testing.T) {
		t.Parallel()
		d := def(t, lockrt.Reentrant, 5*time.Second, true, 10*time.Second)
		k := key(t)
		var inside, overlaps, done atomic.Int64
		var wg sync.WaitGroup
		for range 3 {
			c := newClient(t, b)
			for range 2 {
				wg.Go(func() {
					for range 50 {
						le, err := c.Lock(d, k).Lock(context.Background())
						if err != nil {
							t.Error(err)
							return
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						done.Add(1)
						inside.Add(-1)
						if err := le.Unlock(context.Background()); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		if overlaps.Load() != 0 || done.Load() != 300 {
			t.Fatalf("%d critical sections, %d overlapped; want 300, 0", done.Load(), overlaps.Load())
		}
	})

	t.Run("waiter", func(t *testing.T) {
		t.Parallel()
		waiterWoken(t, b, key(t))
	})
}

// waiterWoken checks that a waiter on k wakes on the holder's release, not
// when the holder's 30s lease would have run out.
func waiterWoken(t *testing.T, b backend, k string) {
	t.Helper()
	ctx := context.Background()
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	holder, err := newClient(t, b).Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wc := newClient(t, b)
	waiter := wc.Lock(d, k)
	got := lockThenUnlock(ctx, waiter.Lock)
	waitWaiting(t, wc, k, 1, 1)
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("waiter obtained the lock %v after the release", time.Since(released))
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the release")
	}
}

// TestSentinelFailover: locks across failovers, through the same clients.
// After a failover the clients lock again, on the new primary: the failover
// client follows the sentinel's switch, and the runtime reloads its scripts
// on NOSCRIPT (the test flushes them on the replica before promoting it).
//
// Known limitation of Redis, not of lockgen: replication is asynchronous,
// so a lock taken just before a failover may not have reached the replica
// that is promoted. On the new primary the lock is then free, and another
// client can take it while the first still believes it holds it, until
// its next renewal (lease/3) finds the hold gone and cancels its lease
// with ErrLockLost. The same happens if the holder keeps renewing on the
// former primary after the promotion until its lease runs out on the new
// one. Holders that must not overlap even then use fenced locks, whose
// tokens let the resource reject a stale holder. WAIT after locking
// narrows the window but does not close it.
//
// So for a lock held across a failover the test asserts one of two
// outcomes: it is still held, renewed on the new primary, and then a
// contender that tried throughout never obtained it (no overlap); or its
// lease's context was cancelled with ErrLockLost, and then the overlap
// that the limitation allows, if any, is only logged. The second subtest
// forces the second outcome: it deletes the lock on the replica before
// promoting it, as if the write had not been replicated in time.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	s, b := sentinelBackend(t)
	const lease = 3 * time.Second
	a, c := newClient(t, b), newClient(t, b)

	// failover promotes the replica, after flushing its scripts.
	failover := func(t *testing.T) time.Time {
		t.Helper()
		ctx := context.Background()
		if err := s.Replica.Client().ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		former, began := s.Primary, time.Now()
		if err := s.Failover(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("failover from %s to %s in %v", former.Addr, s.Primary.Addr, time.Since(began))
		return time.Now()
	}

	// lockAgain takes and releases a new lock through a, and checks that it
	// is on the new primary.
	lockAgain := func(t *testing.T, d *lockrt.LockDef) {
		t.Helper()
		ctx := context.Background()
		l := a.Lock(d, key(t, "again"))
		le, err := l.Lock(ctx)
		if err != nil {
			t.Fatalf("lock after failover: %v", err)
		}
		if n := s.Primary.Client().Exists(ctx, l.Key()).Val(); n != 1 {
			t.Fatalf("the lock taken after the failover is not on the new primary %s", s.Primary.Addr)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatalf("unlock after failover: %v", err)
		}
	}

	t.Run("held", func(t *testing.T) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, lease, true, 10*time.Second)
		held := a.Lock(d, key(t))
		le, err := held.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}

		// The contender tries every 20ms until told to stop, and keeps
		// the lock if it obtains it.
		var (
			contended   *lockrt.Lease
			contendedAt time.Time
			tries, errs int
		)
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				tries++
				l, err := c.Lock(d, held.Key()).TryLock(ctx, 0)
				switch {
				case err == nil:
					contended, contendedAt = l, time.Now()
					return
				case !errors.Is(err, lockrt.ErrNotObtained):
					errs++ // e.g. a connection closed by the failover
				}
			}
		}()

		switched := failover(t)
		lockAgain(t, d)

		// Settle the held lock: a lease after the switch, its holder has
		// renewed it on the new primary (the expiry timer of a renewal
		// sent earlier, to the former primary, would have fired by now),
		// or has learned that it is lost.
		select {
		case <-le.Context().Done():
		case <-time.After(time.Until(switched.Add(lease + lease/4))):
		}
		close(stop)
		<-stopped
		t.Logf("contender: %d tries, %d errors", tries, errs)

		if le.Context().Err() != nil {
			cause := context.Cause(le.Context())
			if !errors.Is(cause, lockrt.ErrLockLost) {
				t.Fatalf("held lock's lease ended with %v, want ErrLockLost or still held", cause)
			}
			t.Logf("the held lock was lost at the failover: %v", cause)
			if contended != nil {
				t.Logf("the contender obtained it %v after the switch (the limitation above)", contendedAt.Sub(switched))
			} else if contended, err = c.Lock(d, held.Key()).TryLock(ctx, lease); err != nil {
				t.Fatalf("the lost lock cannot be taken: %v", err)
			}
			if err := contended.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			return
		}

		t.Log("the held lock survived the failover (replicated)")
		if contended != nil {
			t.Fatalf("two holders: the contender obtained the lock %v after the switch while its holder still holds it",
				contendedAt.Sub(switched))
		}
		if v, err := s.Primary.Client().Get(ctx, held.Key()).Result(); err != nil || !strings.HasPrefix(v, a.ID()+":") {
			t.Fatalf("new primary: held lock = %q, %v; want a hold of client %s", v, err, a.ID())
		}
		// The contender, waiting now, is woken by the release.
		got := make(chan error, 1)
		go func() {
			l, err := c.Lock(d, held.Key()).Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		waitWaiting(t, c, held.Key(), 1, 1)
		if err := le.Unlock(ctx); err != nil {
			t.Fatalf("unlock of the held lock: %v", err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by the release after the failover")
		}
	})

	t.Run("unreplicated", func(t *testing.T) {
		ctx := context.Background()
		d := def(t, lockrt.Reentrant, lease, true, 10*time.Second)
		l := a.Lock(d, key(t))
		le, err := l.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The lock reaches the replica, which then loses it: the state
		// of a replica that the write had not reached. Renewals do not
		// bring it back: PEXPIRE of a missing key does nothing.
		if n, err := s.Primary.Client().Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
			t.Fatalf("WAIT 1 = %d, %v", n, err)
		}
		rep := s.Replica.Client()
		for _, cmd := range [][]any{
			{"CONFIG", "SET", "replica-read-only", "no"},
			{"DEL", l.Key()},
			{"CONFIG", "SET", "replica-read-only", "yes"},
		} {
			if err := rep.Do(ctx, cmd...).Err(); err != nil {
				t.Fatalf("%v on the replica: %v", cmd, err)
			}
		}

		switched := failover(t)
		select {
		case <-le.Context().Done():
			t.Logf("the lease ended %v after the switch", time.Since(switched))
		case <-time.After(time.Until(switched.Add(lease + lease/4))):
			t.Fatal("the lease of a lock the new primary never had is still live")
		}
		if cause := context.Cause(le.Context()); !errors.Is(cause, lockrt.ErrLockLost) {
			t.Fatalf("cause = %v, want ErrLockLost", cause)
		}
		if err := le.Unlock(ctx); !errors.Is(err, lockrt.ErrLockLost) {
			t.Fatalf("Unlock of the lost lease: %v, want ErrLockLost", err)
		}
		lc, err := c.Lock(d, l.Key()).TryLock(ctx, 0)
		if err != nil {
			t.Fatalf("the lost lock cannot be taken: %v", err)
		}
		if err := lc.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		lockAgain(t, d)
	})
}
