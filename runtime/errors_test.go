package runtime_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestBlockingCallsRideOutOutage: Lock, Acquire, Await and Take that are
// waiting when Redis goes away keep waiting (retrying with a backoff) and
// succeed once it is back, instead of returning the first connection
// error; TryLock without a wait fails fast. Before, each blocking call
// returned the connection error at its first attempt during the outage.
func TestBlockingCallsRideOutOutage(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	bg := context.Background()
	holder := newClient(t, b)
	const lease = 1500 * time.Millisecond
	ld := def(t, lockrt.Reentrant, lease, false, 0)
	sd := semDef(t, 1, lease, false, 0)
	lk, sk := key(t, "lock"), key(t, "sem")
	if _, err := holder.Lock(ld, lk).Lock(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Semaphore(sd, sk).Acquire(bg, 1); err != nil {
		t.Fatal(err)
	}
	latch := latchDef(t, 1, time.Minute)
	qd := queueDef(t, false, time.Minute, 5)
	results := make(chan string, 5)
	run := func(what string, f func(ctx context.Context) error) {
		go func() {
			ctx, cancel := context.WithTimeout(bg, 20*time.Second)
			defer cancel()
			if err := f(ctx); err != nil {
				results <- what + ": " + err.Error()
				return
			}
			results <- ""
		}()
	}
	lc, sc, ac, qc := newClient(t, b), newClient(t, b), newClient(t, b), namedClient(t, b)
	lak := key(t, "latch")
	run("Lock", func(ctx context.Context) error {
		_, err := lc.Lock(ld, lk).Lock(ctx)
		return err
	})
	run("Acquire", func(ctx context.Context) error {
		_, err := sc.Semaphore(sd, sk).Acquire(ctx, 1)
		return err
	})
	run("Await", func(ctx context.Context) error {
		return ac.Latch(latch, lak).Await(ctx)
	})
	run("Take", func(ctx context.Context) error {
		_, err := lockrt.NewReliableQueue(qc, qd, lockrt.JSON[string]{}, key(t, "queue")).Take(ctx)
		return err
	})

	// All four wait.
	waitWaiting(t, lc, lk, 1, 1)
	waitWaiting(t, sc, sk, 1, 1)
	waitAwaiting(t, lak, ac)
	waitTakers(t, qc.Redis(), key(t, "queue"), 1)

	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Lock(ld, key(t, "other")).TryLock(bg, 0); err == nil || errors.Is(err, lockrt.ErrNotObtained) {
		t.Errorf("TryLock without a wait while Redis is down: %v, want the connection error", err)
	}
	// A Take without a deadline that begins during the outage rides it
	// out too (its claim's transient error was returned at once: the wait
	// had no end to retry within).
	qc2 := namedClient(t, b)
	failed := &failCounter{}
	qc2.Redis().AddHook(failed)
	go func() {
		_, err := lockrt.NewReliableQueue(qc2, qd, lockrt.JSON[string]{}, key(t, "queue")).Take(bg)
		if err != nil {
			results <- "Take without a deadline: " + err.Error()
			return
		}
		results <- ""
	}()
	eventually(t, failAfter, func() bool { return failed.n.Load() > 0 }, "the Take did not try during the outage")
	time.Sleep(2 * lease) // every waiter's fallback timer fires during the outage
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted node is empty: the lock and the permit are free.
	if _, err := holder.Latch(latch, key(t, "latch")).CountDown(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := lockrt.NewReliableQueue(holder, qd, lockrt.JSON[string]{}, key(t, "queue")).OfferMany(bg, "x", "y"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if r := <-results; r != "" {
			t.Errorf("a blocking call ended with the outage: %s", r)
		}
	}
}

// failCounter counts the commands of a client that failed.
type failCounter struct{ n atomic.Int64 }

func (h *failCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && !errors.Is(err, redis.Nil) {
			h.n.Add(1)
		}
		return err
	}
}
func (h *failCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestWaitEndsWithLastError: a wait that ends while Redis is unreachable
// matches ErrNotObtained, the context's error and the last Redis error.
func TestWaitEndsWithLastError(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	d := def(t, lockrt.Reentrant, time.Second, false, 0)
	k := key(t)
	if _, err := newClient(t, b).Lock(d, k).Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	wc := newClient(t, b)
	go func() {
		_, err := wc.Lock(d, k).Lock(ctx)
		done <- err
	}()
	waitWaiting(t, wc, k, 1, 1)
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, lockrt.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("wait ended with %v, want ErrNotObtained, DeadlineExceeded and the connection error", err)
	}
}

// TestUnlockKnownLost: Unlock of a lease the runtime knows is lost returns
// ErrLockLost, also when Redis cannot be reached. Before, it returned the
// connection error.
func TestUnlockKnownLost(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	c := newClient(t, b)
	le, err := c.Lock(def(t, lockrt.Reentrant, 500*time.Millisecond, true, 0), key(t)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	<-le.Context().Done()
	if err := le.Unlock(context.Background()); !errors.Is(err, lockrt.ErrLockLost) {
		t.Errorf("Unlock of a lost lease with Redis down: %v, want ErrLockLost", err)
	}
}

// delayBefore delays the first command running a script before it is
// sent, as a pause or an outage between the call and Redis would.
type delayBefore struct {
	sha   string
	delay time.Duration
	done  atomic.Bool
}

func (h *delayBefore) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *delayBefore) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && args[0] == "evalsha" && args[1] == h.sha && h.done.CompareAndSwap(false, true) {
			time.Sleep(h.delay)
		}
		return next(ctx, cmd)
	}
}
func (h *delayBefore) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLateAcquireIsLost: an acquire that completes after its lease ran out
// by the local clock (the call was held up between the caller and Redis)
// returns a lease already lost, and its Unlock agrees (ErrLockLost) while
// still releasing the key. Before, Unlock returned nil.
func TestLateAcquireIsLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, renew := range []bool{true, false} {
			rdb := b.new()
			t.Cleanup(func() { rdb.Close() })
			c := lockrt.New(rdb)
			t.Cleanup(func() { c.Close() })
			d := def(t, lockrt.Reentrant, 300*time.Millisecond, renew, 0)
			if err := c.Preload(context.Background(), d.Scripts.Acquire); err != nil {
				t.Fatal(err)
			}
			rdb.AddHook(&delayBefore{sha: d.Scripts.Acquire.SHA1, delay: 500 * time.Millisecond})
			l := c.Lock(d, key(t, strconv.FormatBool(renew)))
			le, err := l.Lock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Context().Err(); err == nil {
				t.Errorf("renew %v: lease live although its lease ran out before the acquire returned", renew)
			}
			if cause := context.Cause(le.Context()); !errors.Is(cause, lockrt.ErrLockLost) {
				t.Errorf("renew %v: cause %v, want ErrLockLost", renew, cause)
			}
			if err := le.Unlock(context.Background()); !errors.Is(err, lockrt.ErrLockLost) {
				t.Errorf("renew %v: Unlock of a lease lost at once: %v, want ErrLockLost", renew, err)
			}
			if held, err := l.IsLocked(context.Background()); err != nil || held {
				t.Errorf("renew %v: still locked after Unlock (%v)", renew, err)
			}
		}
	})
}

// TestSemaphoreTimeoutError: a semaphore's wait that runs out says so in
// terms of permits (ErrNoPermit), still matching ErrNotObtained and the
// context's error. Before, it said "lock not obtained".
func TestSemaphoreTimeoutError(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b)
		s := c.Semaphore(semDef(t, 1, time.Minute, true, 0), key(t))
		if _, err := s.Acquire(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		check := func(what string, err error, ctxErr error) {
			t.Helper()
			if !errors.Is(err, lockrt.ErrNoPermit) || !errors.Is(err, lockrt.ErrNotObtained) || strings.Contains(err.Error(), "lock not obtained") {
				t.Errorf("%s: %v, want ErrNoPermit (also ErrNotObtained) naming permits", what, err)
			}
			if ctxErr != nil && !errors.Is(err, ctxErr) {
				t.Errorf("%s: %v does not match %v", what, err, ctxErr)
			}
		}
		_, err := s.TryAcquire(context.Background(), 1, 0)
		check("TryAcquire(0)", err, nil)
		_, err = s.TryAcquire(context.Background(), 1, 100*time.Millisecond)
		check("TryAcquire(100ms)", err, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err = s.Acquire(ctx, 1)
		check("Acquire(ctx 100ms)", err, context.DeadlineExceeded)
	})
}

// runTwice runs the first command running script twice, answering with
// the second reply only: a reply lost on a cut connection and the command
// sent again (by go-redis' retry or the wait's).
type runTwice struct {
	sha  string
	done atomic.Bool
}

func (h *runTwice) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *runTwice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && args[0] == "evalsha" && args[1] == h.sha && h.done.CompareAndSwap(false, true) {
			if err := next(ctx, cmd); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}
func (h *runTwice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAcquireRunTwice: when an acquire's script runs twice for a new owner
// (its first reply lost), the lease holds the lock once: Unlock frees it,
// and a simple lock is not refused as a re-entry. Before, the reentrant
// kinds held it twice, so Unlock returned nil and left the lock held for
// another lease; a simple lock returned ErrNotReentrant and stayed held.
func TestAcquireRunTwice(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		bg := context.Background()
		rdb := b.new()
		t.Cleanup(func() { rdb.Close() })
		c := lockrt.New(rdb)
		t.Cleanup(func() { c.Close() })
		rd := def(t, lockrt.ReadWrite, time.Minute, true, 0)
		for _, k := range []struct {
			kind string
			d    *lockrt.LockDef
			l    func(d *lockrt.LockDef) *lockrt.Lock
		}{
			{"reentrant", def(t, lockrt.Reentrant, time.Minute, true, 0), nil},
			{"simple", def(t, lockrt.Simple, time.Minute, true, 0), nil},
			{"fair", def(t, lockrt.Fair, time.Minute, true, 0), nil},
			{"fenced", def(t, lockrt.Fenced, time.Minute, true, 0), nil},
			{"read", rd, func(d *lockrt.LockDef) *lockrt.Lock { return c.RWLock(d, key(t, "read")).Read() }},
			{"write", rd, func(d *lockrt.LockDef) *lockrt.Lock { return c.RWLock(d, key(t, "write")).Write() }},
		} {
			kind, d := k.kind, k.d
			l := c.Lock(d, key(t, kind))
			if k.l != nil {
				l = k.l(d)
			}
			if err := c.Preload(bg, d.Scripts.Acquire); err != nil {
				t.Fatal(err)
			}
			h := &runTwice{sha: d.Scripts.Acquire.SHA1}
			rdb.AddHook(h)
			le, err := l.Lock(bg)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			if !h.done.Load() {
				t.Fatalf("%s: the acquire did not run twice", kind)
			}
			if n, err := l.HoldCount(le.Context()); err != nil || n != 1 {
				t.Errorf("%s: %d holds after an acquire that ran twice (%v), want 1", kind, n, err)
			}
			if err := le.Unlock(bg); err != nil {
				t.Errorf("%s: %v", kind, err)
			}
			if held, err := l.IsLocked(bg); err != nil || held {
				t.Errorf("%s: still locked after Unlock (%v)", kind, err)
			}
		}
	})
}
