package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// ownNode returns a backend on a node of the test's own, for tests that
// stop or restart Redis.
func ownNode(t *testing.T) (*redistest.Node, backend) {
	n := redistest.Single(t)
	return n, backend{"own", func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	}}
}

// ownClient returns a client of a redis-server of the test's own (for
// counts read from INFO commandstats that no other test may disturb),
// closed and stopped when the test ends.
func ownClient(t *testing.T) *redis.Client { return redistest.Single(t).Client() }

// TestRedisDownLosesLease: when Redis cannot be reached, the lease's
// context is cancelled with ErrLockLost no later than the lease would
// have run out, since the lock may be taken by others from then on.
func TestRedisDownLosesLease(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	const lease = time.Second
	c := newClient(t, b)
	le, err := c.Lock(def(t, lockrt.Reentrant, lease, true, 0), key(t)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-le.Context().Done():
	case <-time.After(5 * lease):
		t.Fatal("lease context still live long after Redis went away")
	}
	if since := time.Since(acquired); since > lease+lease/2 {
		t.Errorf("lease cancelled %v after acquisition, lease is %v", since, lease)
	}
	if cause := context.Cause(le.Context()); !errors.Is(cause, lockrt.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
}

// TestRedisRestart: a restart loses the data (no persistence): the holder
// learns its lock is gone at the next renewal, and locking works again
// afterwards although the server forgot the scripts.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	ctx := context.Background()
	c := newClient(t, b)
	d := def(t, lockrt.Reentrant, 3*time.Second, true, 5*time.Second)
	l := c.Lock(d, key(t))
	le, err := l.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-le.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease survived a restart that lost its key")
	}
	if cause := context.Cause(le.Context()); !errors.Is(cause, lockrt.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
	le2, err := l.Lock(ctx)
	if err != nil {
		t.Fatalf("lock after restart: %v", err)
	}
	if err := le2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPubSubReconnect: a waiter whose pub/sub connection is cut is still
// woken promptly by the release (go-redis resubscribes; the hub wakes its
// waiters because messages may have been lost).
func TestPubSubReconnect(t *testing.T) {
	t.Parallel()
	_, b := ownNode(t)
	ctx := context.Background()
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	k := key(t)
	holder := newClient(t, b)
	le, err := holder.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	waiter := newClientWith(t, b, lockrt.WithObserver(rec))
	got := lockThenUnlock(ctx, waiter.Lock(d, k).Lock)
	waitWaiting(t, waiter, k, 1, 1)
	if err := holder.Redis().Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, failAfter, func() bool { return rec.count(lockrt.EventResubscribed) > 0 }, "the waiter's hub did not resubscribe")
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken after its pub/sub connection was cut")
	}
}
