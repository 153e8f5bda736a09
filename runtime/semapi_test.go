package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestSemaphoreDrain: Drain takes every free permit as one hold, which
// Acquired counts; a second Drain finds none (ErrNoPermit); releasing the
// drained permit gives them back.
func TestSemaphoreDrain(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newClient(t, b).Semaphore(semDef(t, 5, 30*time.Second, true, 0), key(t))
		p2, err := s.Acquire(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		d, err := s.Drain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Permits() != 3 {
			t.Fatalf("Drain took %d permits, want the 3 free", d.Permits())
		}
		if n, err := s.Available(ctx); err != nil || n != 0 {
			t.Fatalf("Available after Drain = %d, %v; want 0", n, err)
		}
		if n, err := s.Acquired(ctx); err != nil || n != 5 {
			t.Fatalf("Acquired after Drain = %d, %v; want 5", n, err)
		}
		if _, err := s.Drain(ctx); !errors.Is(err, lockrt.ErrNoPermit) || !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("Drain with nothing free: %v, want ErrNoPermit", err)
		}
		if err := d.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Available(ctx); err != nil || n != 3 {
			t.Fatalf("Available after releasing the drained permit = %d, %v; want 3", n, err)
		}
		if err := p2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Acquired(ctx); err != nil || n != 0 {
			t.Fatalf("Acquired after every release = %d, %v; want 0", n, err)
		}
	})
}

// TestSemaphoreTrySetPermits: TrySetPermits sets a capacity only when none
// is set, and a waiter the new capacity satisfies gets its permits.
func TestSemaphoreTrySetPermits(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := semDef(t, 1, 30*time.Second, true, time.Minute)
		k := key(t)
		s := newClient(t, b).Semaphore(d, k)
		if _, err := s.TrySetPermits(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("TrySetPermits(0): %v, want ErrInvalidArgument", err)
		}
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			p, err := newClient(t, b).Semaphore(d, k).Acquire(ctx, 1)
			if err == nil {
				err = p.Release(ctx)
			}
			got <- err
		}()
		waitRegistered(t, newClient(t, b).Redis(), k, 1)
		if ok, err := s.TrySetPermits(ctx, 2); err != nil || !ok {
			t.Fatalf("TrySetPermits(2) on a semaphore without a set capacity = %v, %v; want true", ok, err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter did not get the permit the new capacity frees")
		}
		if ok, err := s.TrySetPermits(ctx, 7); err != nil || ok {
			t.Fatalf("TrySetPermits(7) with a capacity set = %v, %v; want false", ok, err)
		}
		if n, err := s.Capacity(ctx); err != nil || n != 2 {
			t.Fatalf("Capacity = %d, %v; want 2", n, err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSemaphoreCapacityWait: by default an acquire of more permits than
// the capacity fails at once; WithCapacityWait waits until AddPermits
// raises the capacity, without holding back smaller requests meanwhile.
func TestSemaphoreCapacityWait(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := semDef(t, 2, 30*time.Second, true, time.Minute)
		k := key(t)
		s := newClient(t, b).Semaphore(d, k)
		if _, err := s.Acquire(ctx, 3); !errors.Is(err, lockrt.ErrTooManyPermits) {
			t.Fatalf("Acquire(3) of 2: %v, want ErrTooManyPermits", err)
		}
		if _, err := s.TryAcquire(ctx, 3, 0, lockrt.WithCapacityWait()); !errors.Is(err, lockrt.ErrNoPermit) {
			t.Fatalf("TryAcquire(3, 0) of 2 with WithCapacityWait: %v, want ErrNoPermit", err)
		}
		got := make(chan *lockrt.Permit, 1)
		errs := make(chan error, 1)
		go func() {
			p, err := newClient(t, b).Semaphore(d, k).Acquire(ctx, 3, lockrt.WithCapacityWait())
			if err != nil {
				errs <- err
				return
			}
			got <- p
		}()
		waitRegistered(t, newClient(t, b).Redis(), k, 1)
		// The waiter for 3 does not hold back a request the capacity allows.
		p1, err := s.TryAcquire(ctx, 1, 0)
		if err != nil {
			t.Fatalf("a request for 1 of 2 free behind a waiter for more than the capacity: %v", err)
		}
		if err := p1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := s.AddPermits(ctx, 1); err != nil || n != 3 {
			t.Fatalf("AddPermits(1) = %d, %v; want 3", n, err)
		}
		select {
		case p := <-got:
			if p.Permits() != 3 {
				t.Fatalf("got %d permits, want 3", p.Permits())
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter for 3 did not get them when the capacity grew to 3")
		}
		// Lowering the capacity below a waiter's request fails a waiter
		// without the option at once.
		p, err := s.Acquire(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		plain := make(chan error, 1)
		go func() {
			_, err := newClient(t, b).Semaphore(d, k).Acquire(ctx, 2)
			plain <- err
		}()
		waitRegistered(t, newClient(t, b).Redis(), k, 1)
		if err := s.SetPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-plain:
			if !errors.Is(err, lockrt.ErrTooManyPermits) {
				t.Fatalf("a waiter for 2 when the capacity fell to 1: %v, want ErrTooManyPermits", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter for more than the new capacity was not told")
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCapacityFellBeforeSubscribing: a waiter for 2 permits registers,
// and before its channel is subscribed an operator lowers the capacity
// to 1: the message that tells it reaches nobody. Its look after
// subscribing (which stands for a second attempt: see
// TestFirstWaitReadsInsteadOfTrying) finds its request above the
// capacity, so it tries, and fails with ErrTooManyPermits at once,
// where sleeping would have held it until its client's refresh.
func TestCapacityFellBeforeSubscribing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := semDef(t, 3, 30*time.Second, true, time.Minute)
		k := key(t)
		s := newClient(t, b).Semaphore(d, k)
		p, err := s.Acquire(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		h := newLookHook(d.Scripts.Acquire.SHA1, true)
		w := hookedClient(t, b, h)
		got := make(chan error, 1)
		go func() {
			_, err := w.Semaphore(d, k).Acquire(ctx, 2)
			got <- err
		}()
		<-h.ran // registered, its channel not subscribed
		if err := s.SetPermits(ctx, 1); err != nil {
			t.Fatal(err)
		}
		close(h.gate)
		select {
		case err := <-got:
			if !errors.Is(err, lockrt.ErrTooManyPermits) {
				t.Fatalf("the waiter for 2 when the capacity fell to 1: %v, want ErrTooManyPermits", err)
			}
		case <-time.After(lockrt.LiveRegistryTTL / 6):
			t.Fatal("the waiter for 2 was not told that the capacity fell to 1")
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSemaphoreAcquireEach: AcquireEach(3) holds three permits, each
// released alone: after one Release one permit is free (a waiter gets
// it), after the others none is held. A split whose reply was lost
// (go-redis runs it again) splits once. A permit of one splits into
// itself; a released one does not split.
func TestSemaphoreAcquireEach(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c, l, _ := lossyClient(t, b)
		d := semDef(t, 3, 5*time.Second, true, time.Minute)
		s := c.Semaphore(d, key(t))
		l.lose(d.Scripts.Split.SHA1, 1)
		ps, err := s.AcquireEach(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		mustLose(t, l)
		if len(ps) != 3 {
			t.Fatalf("%d permits, want 3", len(ps))
		}
		for i, p := range ps {
			if p.Permits() != 1 {
				t.Fatalf("permit %d holds %d", i, p.Permits())
			}
			if d, err := p.TTL(ctx); err != nil || d <= 0 {
				t.Fatalf("permit %d: TTL %v, %v", i, d, err)
			}
		}
		if n, err := s.Acquired(ctx); err != nil || n != 3 {
			t.Fatalf("Acquired: %d, %v; want 3", n, err)
		}
		if err := ps[1].Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ps[1].Release(ctx); !errors.Is(err, lockrt.ErrPermitNotHeld) {
			t.Fatalf("second Release: %v", err)
		}
		if n, err := s.Available(ctx); err != nil || n != 1 {
			t.Fatalf("Available after one Release: %d, %v; want 1", n, err)
		}
		other, err := s.TryAcquire(ctx, 1, 0)
		if err != nil {
			t.Fatalf("a permit released alone is free: %v", err)
		}
		if _, err := ps[1].Split(ctx); !errors.Is(err, lockrt.ErrPermitNotHeld) {
			t.Fatalf("Split of a released permit: %v", err)
		}
		if one, err := ps[0].Split(ctx); err != nil || len(one) != 1 || one[0] != ps[0] {
			t.Fatalf("Split of one permit: %v, %v", one, err)
		}
		for _, p := range []*lockrt.Permit{ps[0], ps[2], other} {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.Acquired(ctx); err != nil || n != 0 {
			t.Fatalf("Acquired after every Release: %d, %v", n, err)
		}
	})
}

// TestSemaphoreCapacityTTL: a capacity set WithCapacityTTL lasts its TTL,
// then the spec's permits apply again, also to scripts that cached the
// capacity while waiters were registered: a release after the TTL hands
// nothing to a waiter the spec's one permit does not leave room for.
// TrySetPermits succeeds again after the TTL; AddPermits keeps the TTL.
func TestSemaphoreCapacityTTL(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const ttl = 500 * time.Millisecond
		c := newClient(t, b)
		s := c.Semaphore(semDef(t, 1, 30*time.Second, true, time.Minute), key(t))
		if err := s.SetPermits(ctx, 2, lockrt.WithCapacityTTL(0)); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("a TTL of 0: %v", err)
		}
		if err := s.SetPermits(ctx, 2, lockrt.WithCapacityTTL(ttl)); err != nil {
			t.Fatal(err)
		}
		p1, err := s.TryAcquire(ctx, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := s.TryAcquire(ctx, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := inBackground(t, func() (*lockrt.Permit, error) { return s.Acquire(ctx, 1) })
		waitWaiting(t, c, s.Key(), 1, 1) // registered: the scripts cached the capacity
		eventually(t, failAfter, func() bool { n, err := s.Capacity(ctx); return err == nil && n == 1 },
			"the capacity did not go back to the spec's after its TTL")
		if err := p1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Acquired(ctx); err != nil || n != 1 {
			t.Fatalf("after a release past the TTL: %d held (%v), want 1 (the spec's capacity)", n, err)
		}
		if err := p2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var pw *lockrt.Permit
		select {
		case pw = <-w:
		case <-time.After(failAfter):
			t.Fatal("the waiter got no permit")
		}
		if err := pw.Release(ctx); err != nil {
			t.Fatal(err)
		}

		if ok, err := s.TrySetPermits(ctx, 3, lockrt.WithCapacityTTL(ttl)); err != nil || !ok {
			t.Fatalf("TrySetPermits: %v, %v", ok, err)
		}
		if ok, err := s.TrySetPermits(ctx, 4); err != nil || ok {
			t.Fatalf("TrySetPermits while one is set: %v, %v", ok, err)
		}
		if n, err := s.AddPermits(ctx, 1); err != nil || n != 4 {
			t.Fatalf("AddPermits: %d, %v", n, err)
		}
		if d := c.Redis().PTTL(ctx, s.Key()+":capacity").Val(); d <= 0 || d > ttl {
			t.Fatalf("the capacity's TTL after AddPermits: %v, want (0, %v]", d, ttl)
		}
		eventually(t, failAfter, func() bool { ok, err := s.TrySetPermits(ctx, 5); return err == nil && ok },
			"TrySetPermits did not succeed after the TTL")
		if n, err := s.Capacity(ctx); err != nil || n != 5 {
			t.Fatalf("Capacity: %d, %v", n, err)
		}
		if d := c.Redis().PTTL(ctx, s.Key()+":capacity").Val(); d != -1 {
			t.Fatalf("a capacity set without a TTL has TTL %v", d)
		}
	})
}
