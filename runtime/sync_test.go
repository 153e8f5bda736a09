package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestReplicaSync: a lock with sync: { replicas: 1 } through a Sentinel
// deployment is on the replica the moment Lock returns, in one round trip
// (EVALSHA and WAIT pipelined), and so survives a failover: after it,
// another client cannot take it and the holder unlocks it. With the
// replica unresponsive (DEBUG SLEEP), Lock fails with ErrNotReplicated
// and leaves nothing held.
func TestReplicaSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, b := sentinelBackend(t)
	d := def(t, lockrt.Reentrant, 10*time.Second, true, 0)
	d.Sync = lockrt.SyncDef{Replicas: 1, Timeout: time.Second}
	rdb := b.new()
	defer rdb.Close()
	c := lockrt.New(rdb)
	defer c.Close()
	// Warm up: scripts loaded, a connection open.
	warm, err := c.Lock(d, key(t, "warm-up")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	k := key(t)
	h := &countHook{}
	rdb.AddHook(h)
	le, err := c.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.n.Load(); n != 1 {
		t.Errorf("Lock with sync took %d round trips, want 1", n)
	}
	// No WAIT of the test's own: the lock is on the replica already.
	if n, err := s.Replica.Client().Exists(ctx, k).Result(); err != nil || n != 1 {
		t.Fatalf("replica: EXISTS = %d, %v when Lock returned", n, err)
	}
	// A fair lock too.
	fd := def(t, lockrt.Fair, 10*time.Second, true, 0)
	fd.Sync = d.Sync
	fk := key(t, "fair")
	fle, err := c.Lock(fd, fk).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Replica.Client().Exists(ctx, fk).Result(); err != nil || n != 1 {
		t.Fatalf("replica: EXISTS fair = %d, %v when Lock returned", n, err)
	}
	if err := fle.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	other := newClient(t, b).Lock(d, k)
	if _, err := other.TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
		t.Fatalf("after the failover another client: %v, want ErrNotObtained", err)
	}
	if err := le.Context().Err(); err != nil {
		t.Fatalf("lease lost in the failover: %v", context.Cause(le.Context()))
	}
	if err := le.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the failover: %v", err)
	}

	// The replica does not answer for 2s: WAIT times out.
	d2 := def(t, lockrt.Reentrant, 10*time.Second, true, 0)
	d2.Sync = lockrt.SyncDef{Replicas: 1, Timeout: 300 * time.Millisecond}
	replica := s.Replica.Client()
	slept := make(chan error, 1)
	go func() { slept <- replica.Do(ctx, "DEBUG", "SLEEP", "2").Err() }()
	// Asleep once a PING of another connection gets no answer for 250ms.
	probe := redis.NewClient(&redis.Options{Addr: s.Replica.Addr, ReadTimeout: 250 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	eventually(t, failAfter, func() bool { return probe.Ping(ctx).Err() != nil }, "the replica does not sleep")
	k2 := key(t, "unreplicated")
	if _, err := c.Lock(d2, k2).Lock(ctx); !errors.Is(err, lockrt.ErrNotReplicated) {
		t.Fatalf("Lock with the replica asleep: %v, want ErrNotReplicated", err)
	} else {
		t.Log(err)
	}
	if held, err := c.Lock(d2, k2).IsLocked(ctx); err != nil || held {
		t.Fatalf("after ErrNotReplicated the lock is held: %v, %v", held, err)
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
}
