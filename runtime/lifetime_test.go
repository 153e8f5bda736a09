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

// cancelled returns a context that has been cancelled.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// lockKinds returns one lock of each kind (both sides of a readwrite
// lock) on c, with the given lease, renewed.
func lockKinds(t *testing.T, c *lockrt.Client, lease time.Duration) map[string]*lockrt.Lock {
	rd := def(t, lockrt.ReadWrite, lease, true, 0)
	return map[string]*lockrt.Lock{
		"reentrant": c.Lock(def(t, lockrt.Reentrant, lease, true, 0), key(t, "reentrant")),
		"simple":    c.Lock(def(t, lockrt.Simple, lease, true, 0), key(t, "simple")),
		"fair":      c.Lock(def(t, lockrt.Fair, lease, true, 0), key(t, "fair")),
		"fenced":    c.Lock(def(t, lockrt.Fenced, lease, true, 0), key(t, "fenced")),
		"read":      c.RWLock(rd, key(t, "rw-r")).Read(),
		"write":     c.RWLock(rd, key(t, "rw-w")).Write(),
	}
}

// TestReleaseUnderCancelledContext: every release completes with the
// caller's context already cancelled (defer lease.Unlock(ctx) with a
// request context): Unlock of every lock kind and of multi-locks, a
// permit's Release, Ack and Nack, CountDown, and a fair waiter leaving.
// Before, Unlock and Release failed with "context canceled" and the lock
// stayed held for its whole lease.
func TestReleaseUnderCancelledContext(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		bg := context.Background()
		c := newClient(t, b)
		for kind, l := range lockKinds(t, c, time.Minute) {
			le, err := l.Lock(bg)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			if err := le.Unlock(cancelled()); err != nil {
				t.Errorf("%s: Unlock with a cancelled context: %v", kind, err)
			}
			if held, err := l.IsLocked(bg); err != nil || held {
				t.Errorf("%s: still locked after Unlock (%v)", kind, err)
			}
		}

		d := def(t, lockrt.Reentrant, time.Minute, true, 0)
		m := lockrt.NewMultiLock(c.Lock(d, key(t, "m1")), c.Lock(def(t, lockrt.Fenced, time.Minute, true, 0), key(t, "m2")))
		ma := lockrt.NewMultiLock(c.Lock(d, key(t, "{a}1")), c.Lock(d, key(t, "{a}2")))
		for _, m := range []*lockrt.MultiLock{m, ma} {
			ml, err := m.Lock(bg)
			if err != nil {
				t.Fatal(err)
			}
			if err := ml.Unlock(cancelled()); err != nil {
				t.Errorf("multi-lock (atomic %v): Unlock with a cancelled context: %v", m.Atomic(), err)
			}
			for _, l := range m.Locks() {
				if held, _ := l.IsLocked(bg); held {
					t.Errorf("multi-lock (atomic %v): %s still locked after Unlock", m.Atomic(), l.Key())
				}
			}
		}

		s := c.Semaphore(semDef(t, 2, time.Minute, true, 0), key(t, "sem"))
		p, err := s.Acquire(bg, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Release(cancelled()); err != nil {
			t.Errorf("permit Release with a cancelled context: %v", err)
		}
		if n, err := s.Available(bg); err != nil || n != 2 {
			t.Errorf("%d permits available after Release (%v), want 2", n, err)
		}

		latch := c.Latch(latchDef(t, 1, time.Minute), key(t, "latch"))
		if n, err := latch.CountDown(cancelled()); err != nil || n != 0 {
			t.Errorf("CountDown with a cancelled context = %d, %v; want 0, nil", n, err)
		}

		q := lockrt.NewReliableQueue(c, queueDef(t, false, time.Minute, 5), lockrt.JSON[string]{}, key(t, "queue"))
		if _, err := q.OfferMany(bg, "ack", "nack"); err != nil {
			t.Fatal(err)
		}
		first, err := q.TryTake(bg, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Ack(cancelled()); err != nil {
			t.Errorf("Ack with a cancelled context: %v", err)
		}
		second, err := q.TryTake(bg, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := second.Nack(cancelled(), nil); err != nil {
			t.Errorf("Nack with a cancelled context: %v", err)
		}
		again, err := q.TryTake(bg, time.Second)
		if err != nil || again.Value != "nack" {
			t.Errorf("after Nack, TryTake = %v, %v; want the nacked item", again, err)
		}

		// A fair waiter whose context is cancelled leaves the queue.
		fd := fairDef(t, time.Minute, time.Minute, time.Minute)
		fk := key(t, "fairq")
		holder, err := c.Lock(fd, fk).Lock(bg)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() {
			_, err := newClient(t, b).Lock(fd, fk).Lock(wctx)
			done <- err
		}()
		waitQueued(t, c.Redis(), fk, 1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled fair waiter: %v", err)
		}
		waitQueued(t, c.Redis(), fk, 0)
		if err := holder.Unlock(cancelled()); err != nil {
			t.Error(err)
		}
	})
}

// TestRedLockReleaseUnderCancelledContext: a RedLock's Unlock with a
// cancelled context releases it on every node.
func TestRedLockReleaseUnderCancelledContext(t *testing.T) {
	t.Parallel()
	nodes := redistest.Independent(t, 3)
	r := quorum(t, nodes).RedLock(redDef(t, time.Minute, true, 0), key(t))
	le, err := r.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := le.Unlock(cancelled()); err != nil {
		t.Errorf("Unlock with a cancelled context: %v", err)
	}
	if n := holders(t, nodes, r.Key()); n != 0 {
		t.Errorf("%d nodes still hold the lock after Unlock", n)
	}
}

// TestReleaseUnreachable: when Redis cannot be reached, Unlock and Release
// return ErrNotReleased wrapping the Redis error, after no more than
// ReleaseTimeout, and the hold is no longer renewed.
func TestReleaseUnreachable(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	bg := context.Background()
	c := newClient(t, b)
	le, err := c.Lock(def(t, lockrt.Reentrant, time.Minute, true, 0), key(t)).Lock(bg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Semaphore(semDef(t, 2, time.Minute, true, 0), key(t, "sem")).Acquire(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = le.Unlock(cancelled())
	if !errors.Is(err, lockrt.ErrNotReleased) || errors.Is(err, lockrt.ErrNotHeld) {
		t.Errorf("Unlock with Redis down: %v, want ErrNotReleased", err)
	}
	if err := p.Release(cancelled()); !errors.Is(err, lockrt.ErrNotReleased) {
		t.Errorf("Release with Redis down: %v, want ErrNotReleased", err)
	}
	if took := time.Since(start); took > 2*lockrt.ReleaseTimeout+time.Second {
		t.Errorf("the releases took %v with Redis down", took)
	}
	if le.Context().Err() == nil || p.Context().Err() == nil {
		t.Error("hold contexts still live after the releases")
	}
}

// TestLeaseOutlivesWaitContext: the context given to Lock bounds the wait,
// not the hold. A lease (and a permit) taken with a context that ends
// afterwards stays live and renewed, keeping the context's values. Before,
// the lease's context derived from the wait's, so a WithTimeout bounding
// the wait cancelled the held lease.
func TestLeaseOutlivesWaitContext(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		type ctxKey struct{}
		// Renewed every lease/3: survives a stall of 2/3 of it. The
		// waits end within a lease: the holds outlive them.
		const lease, waitFor = 2 * time.Second, time.Second
		c := newClient(t, b)
		waitCtx := func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), waitFor)
		}
		check := func(what string, hold context.Context) {
			t.Helper()
			if err := hold.Err(); err != nil {
				t.Errorf("%s: hold context ended with its wait context: %v (cause %v)", what, err, context.Cause(hold))
			}
			if got := hold.Value(ctxKey{}); got != "v" {
				t.Errorf("%s: hold context lost the caller's values: %v", what, got)
			}
		}
		type held struct {
			what   string
			ctx    context.Context
			unlock func(context.Context) error
		}
		var hs []held
		for kind, l := range lockKinds(t, c, lease) {
			wait, cancel := waitCtx()
			defer cancel()
			le, err := l.Lock(wait)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			hs = append(hs, held{kind, le.Context(), le.Unlock})
		}
		wait, cancel := waitCtx()
		defer cancel()
		p, err := c.Semaphore(semDef(t, 2, lease, true, 0), key(t, "sem")).Acquire(wait, 1)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, held{"permit", p.Context(), p.Release})
		time.Sleep(2 * lease) // past the waits, and renewed several times
		for _, h := range hs {
			check(h.what, h.ctx)
			if err := h.unlock(context.Background()); err != nil {
				t.Errorf("%s: %v", h.what, err)
			}
			if !errors.Is(context.Cause(h.ctx), context.Canceled) {
				t.Errorf("%s: after release, cause %v", h.what, context.Cause(h.ctx))
			}
		}
	})
}

// TestWithParentCancel: with WithParentCancel, the hold's context also
// ends when the context given to Lock (Acquire) ends, with its cause; the
// hold itself stays until Unlock (Release).
func TestWithParentCancel(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c := newClient(t, b)
		l := c.Lock(def(t, lockrt.Reentrant, time.Minute, true, 0), key(t))
		s := c.Semaphore(semDef(t, 2, time.Minute, true, 0), key(t, "sem"))
		why := errors.New("request done")
		parent, cancel := context.WithCancelCause(context.Background())
		le, err := l.Lock(parent, lockrt.WithParentCancel())
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Acquire(parent, 1, lockrt.WithParentCancel())
		if err != nil {
			t.Fatal(err)
		}
		if le.Context().Err() != nil || p.Context().Err() != nil {
			t.Fatal("hold context ended before its parent")
		}
		cancel(why)
		for what, ctx := range map[string]context.Context{"lease": le.Context(), "permit": p.Context()} {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				t.Fatalf("%s context still live after its parent ended", what)
			}
			if cause := context.Cause(ctx); cause != why {
				t.Errorf("%s context cause %v, want the parent's", what, cause)
			}
		}
		if held, err := l.IsLocked(context.Background()); err != nil || !held {
			t.Errorf("lock not held after the parent ended (%v)", err)
		}
		if err := le.Unlock(parent); err != nil {
			t.Error(err)
		}
		if err := p.Release(parent); err != nil {
			t.Error(err)
		}
	})
}

// cancelAfter cancels a context once a command running script has been
// answered: a cancellation that races with a successful acquire.
type cancelAfter struct {
	sha    string
	cancel context.CancelFunc
}

func (h *cancelAfter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cancelAfter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) > 1 && args[0] == "evalsha" && args[1] == h.sha {
			h.cancel()
		}
		return err
	}
}
func (h *cancelAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// notObtainedCancelled fails t unless err says the acquire was not
// obtained because the context was cancelled.
func notObtainedCancelled(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, lockrt.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Errorf("%s: %v, want ErrNotObtained and context.Canceled", what, err)
	}
}

// TestAcquireUnderCancelledContext: an acquire with a context that has
// ended returns its error and holds nothing; one whose context is
// cancelled while the acquire script runs releases what it took. Before,
// Lock with a cancelled context took the lock and the watchdog kept
// renewing it.
func TestAcquireUnderCancelledContext(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		bg := context.Background()
		c := newClient(t, b)
		for kind, l := range lockKinds(t, c, time.Minute) {
			le, err := l.Lock(cancelled())
			notObtainedCancelled(t, kind+" Lock", err)
			if le != nil {
				t.Errorf("%s: a lease with a cancelled context", kind)
			}
			_, err = l.TryLock(cancelled(), 0)
			notObtainedCancelled(t, kind+" TryLock", err)
			if held, err := l.IsLocked(bg); err != nil || held {
				t.Errorf("%s: locked by an acquire with a cancelled context (%v)", kind, err)
			}
		}
		s := c.Semaphore(semDef(t, 2, time.Minute, true, 0), key(t, "sem"))
		_, err := s.Acquire(cancelled(), 1)
		notObtainedCancelled(t, "Acquire", err)
		if n, _ := s.Available(bg); n != 2 {
			t.Errorf("%d permits available after an Acquire with a cancelled context", n)
		}
		d := def(t, lockrt.Reentrant, time.Minute, true, 0)
		for _, m := range []*lockrt.MultiLock{
			lockrt.NewMultiLock(c.Lock(d, key(t, "m1")), c.Lock(d, key(t, "m2"))),
			lockrt.NewMultiLock(c.Lock(d, key(t, "{a}1")), c.Lock(d, key(t, "{a}2"))),
		} {
			_, err := m.Lock(cancelled())
			notObtainedCancelled(t, "multi-lock", err)
			for _, l := range m.Locks() {
				if held, _ := l.IsLocked(bg); held {
					t.Errorf("multi-lock (atomic %v): %s locked with a cancelled context", m.Atomic(), l.Key())
				}
			}
		}

		// Cancelled while the script ran: the hold is given back.
		rdb := b.new()
		t.Cleanup(func() { rdb.Close() })
		rc := lockrt.New(rdb)
		t.Cleanup(func() { rc.Close() })
		l := rc.Lock(d, key(t, "race"))
		ctx, cancel := context.WithCancel(bg)
		rdb.AddHook(&cancelAfter{sha: d.Scripts.Acquire.SHA1, cancel: cancel})
		le, err := l.Lock(ctx)
		notObtainedCancelled(t, "Lock cancelled during the script", err)
		if le != nil {
			t.Error("a lease from an acquire cancelled during its script")
		}
		if held, err := l.IsLocked(bg); err != nil || held {
			t.Errorf("locked after an acquire cancelled during its script (%v)", err)
		}
		sd := semDef(t, 2, time.Minute, true, 0)
		rs := rc.Semaphore(sd, key(t, "racesem"))
		ctx, cancel = context.WithCancel(bg)
		rdb.AddHook(&cancelAfter{sha: sd.Scripts.Acquire.SHA1, cancel: cancel})
		_, err = rs.Acquire(ctx, 2)
		notObtainedCancelled(t, "Acquire cancelled during the script", err)
		if n, _ := rs.Available(bg); n != 2 {
			t.Errorf("%d permits available after an Acquire cancelled during its script", n)
		}
	})
}

// TestRedLockUnderCancelledContext: a RedLock with a cancelled context
// takes nothing on any node.
func TestRedLockUnderCancelledContext(t *testing.T) {
	t.Parallel()
	nodes := redistest.Independent(t, 3)
	r := quorum(t, nodes).RedLock(redDef(t, time.Minute, true, 0), key(t))
	_, err := r.Lock(cancelled())
	notObtainedCancelled(t, "RedLock", err)
	if n := holders(t, nodes, r.Key()); n != 0 {
		t.Errorf("%d nodes hold a RedLock taken with a cancelled context", n)
	}
}
