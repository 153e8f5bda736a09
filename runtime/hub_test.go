package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// The tests of the hub's connection layer: waiters recover from an outage
// of Redis and from a killed pub/sub connection (issue 10, item 5).

// contenders runs n separate clients (each its own go-redis client and
// runtime client) that take and give back one resource over and over,
// through acquire, and counts each one's acquisitions. Errors (Redis
// down) are retried after a short pause.
type contenders struct {
	counts []atomic.Int64
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startContenders(t *testing.T, b backend, n int, acquire func(c *lockrt.Client) (release func() error, err error)) *contenders {
	cs := &contenders{counts: make([]atomic.Int64, n), stop: make(chan struct{})}
	for i := range n {
		c := newClient(t, b)
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			for {
				select {
				case <-cs.stop:
					return
				default:
				}
				release, err := acquire(c)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				cs.counts[i].Add(1)
				time.Sleep(100 * time.Millisecond) // hold it, so that the others wait
				_ = release()
				// Let the woken waiters take it: this measures waking, not
				// barging (which a non-fair lock allows).
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(cs.close)
	return cs
}

func (cs *contenders) close() {
	select {
	case <-cs.stop:
	default:
		close(cs.stop)
	}
	cs.wg.Wait()
}

func (cs *contenders) snapshot() []int64 {
	out := make([]int64, len(cs.counts))
	for i := range cs.counts {
		out[i] = cs.counts[i].Load()
	}
	return out
}

// waitAllMoved waits until every contender acquired more often than in
// before, or deadline; it returns how long each took (-1: never).
func (cs *contenders) waitAllMoved(before []int64, deadline time.Duration) []time.Duration {
	start := time.Now()
	took := make([]time.Duration, len(before))
	for i := range took {
		took[i] = -1
	}
	for time.Since(start) < deadline {
		left := 0
		for i := range cs.counts {
			if took[i] < 0 && cs.counts[i].Load() > before[i] {
				took[i] = time.Since(start)
			}
			if took[i] < 0 {
				left++
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return took
}

// outageLease is the lease of the outage tests: a waiter whose
// subscription is gone still retries after at most this long.
const outageLease = time.Second

// checkRecovery fails t unless every contender acquires again within a
// generous deadline after fault ends; it logs how long each took, against
// the bound of lease + 1s.
func checkRecovery(t *testing.T, cs *contenders, n *redistest.Node, k string, fault func()) {
	t.Helper()
	// Every contender has taken it before the fault.
	if took := cs.waitAllMoved(make([]int64, len(cs.counts)), 20*time.Second); anyNegative(took) {
		t.Fatalf("before the fault, not every client acquired: %v", cs.snapshot())
	}
	// Some of them are waiting now: queued on k, a wake-up channel
	// subscribed.
	eventually(t, failAfter, func() bool {
		chans, err := n.Client().PubSubChannels(context.Background(), "*").Result()
		return err == nil && len(chans) > 0 && queueLen(t, n.Client(), k) > 0
	}, "no contender waits")
	fault()
	before := cs.snapshot()
	took := cs.waitAllMoved(before, 10*(outageLease+time.Second))
	t.Logf("acquisitions before the fault's end %v, after %v; time to each client's first acquisition after it: %v (bound lease+1s = %v)",
		before, cs.snapshot(), took, outageLease+time.Second)
	if anyNegative(took) {
		t.Fatalf("some clients never acquired again after the fault: before %v, now %v", before, cs.snapshot())
	}
}

func anyNegative(ds []time.Duration) bool {
	for _, d := range ds {
		if d < 0 {
			return true
		}
	}
	return false
}

// outage kills redis-server with SIGKILL and restarts it empty after down.
func outage(t *testing.T, n interface {
	Kill() error
	Restart() error
}, down time.Duration) func() {
	return func() {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(down)
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOutageLockWaitersRecover: three clients on one lock; Redis is
// killed and restarted empty after 1.5s and, in a second round, 4s. Every
// client acquires again after each restart (issue 10 item 5: before the
// fix, waiters whose wait spanned the outage hung in the hub's subscribe
// for good).
func TestOutageLockWaitersRecover(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	d := def(t, lockrt.Reentrant, outageLease, true, time.Minute)
	k := key(t)
	cs := startContenders(t, b, 3, func(c *lockrt.Client) (func() error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		le, err := c.Lock(d, k).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return le.Unlock(context.Background()) }, nil
	})
	for _, down := range []time.Duration{1500 * time.Millisecond, 4 * time.Second} {
		t.Run(fmt.Sprint("down=", down), func(t *testing.T) {
			checkRecovery(t, cs, n, k, outage(t, n, down))
		})
	}
}

// TestOutageSemaphoreWaitersRecover is TestOutageLockWaitersRecover for a
// semaphore of one permit.
func TestOutageSemaphoreWaitersRecover(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	d := semDef(t, 1, outageLease, true, time.Minute)
	k := key(t)
	cs := startContenders(t, b, 3, func(c *lockrt.Client) (func() error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := c.Semaphore(d, k).Acquire(ctx, 1)
		if err != nil {
			return nil, err
		}
		return func() error { return p.Release(context.Background()) }, nil
	})
	checkRecovery(t, cs, n, k, outage(t, n, 2500*time.Millisecond))
}

// TestPubSubKilledWaitersRecover: CLIENT KILL TYPE pubsub cuts every
// client's pub/sub connection, three times; every client acquires again
// after each.
func TestPubSubKilledWaitersRecover(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	d := def(t, lockrt.Reentrant, outageLease, true, time.Minute)
	k := key(t)
	cs := startContenders(t, b, 3, func(c *lockrt.Client) (func() error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		le, err := c.Lock(d, k).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return le.Unlock(context.Background()) }, nil
	})
	admin := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer admin.Close()
	ctx := context.Background()
	for round := range 3 {
		t.Run(fmt.Sprint("round=", round), func(t *testing.T) {
			checkRecovery(t, cs, n, k, func() {
				killed, err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
				if err != nil || killed == 0 {
					t.Fatalf("CLIENT KILL TYPE pubsub: %d killed, %v", killed, err)
				}
			})
		})
	}
}
