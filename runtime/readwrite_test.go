package runtime_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestRWExclusion: 4 clients x 4 goroutines x 250 random reads and writes
// (50 in `make test`: see volume; one in five a write) on one read-write lock: readers overlap, and no
// reader ever overlaps a writer nor a writer another writer.
func TestRWExclusion(t *testing.T) {
	const clients, goroutines = 4, 4
	ops := volume(250, 25)
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.ReadWrite, 5*time.Second, true, time.Minute)
		k := key(t)
		var readers, writers, maxReaders, violations, reads, writes atomic.Int64
		var wg sync.WaitGroup
		for range clients {
			c := newClient(t, b)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rnd := rand.New(rand.NewPCG(uint64(g), 7))
					for range ops {
						write := rnd.IntN(5) == 0
						side := c.RWLock(d, k).Read()
						if write {
							side = c.RWLock(d, k).Write()
						}
						le, err := side.Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if write {
							if writers.Add(1) != 1 || readers.Load() != 0 {
								violations.Add(1)
							}
							writes.Add(1)
							time.Sleep(50 * time.Microsecond)
							writers.Add(-1)
						} else {
							n := readers.Add(1)
							if writers.Load() != 0 {
								violations.Add(1)
							}
							for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
							}
							reads.Add(1)
							time.Sleep(200 * time.Microsecond)
							readers.Add(-1)
						}
						if err := le.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		t.Logf("%d reads, %d writes, up to %d readers at once", reads.Load(), writes.Load(), maxReaders.Load())
		if v := violations.Load(); v != 0 {
			t.Fatalf("%d exclusion violations", v)
		}
		if maxReaders.Load() < 2 {
			t.Errorf("readers never overlapped")
		}
		if got := reads.Load() + writes.Load(); got != clients*goroutines*int64(ops) {
			t.Errorf("%d operations, want %d", got, clients*goroutines*ops)
		}
		if locked, err := newClient(t, b).RWLock(d, k).IsLocked(ctx); err != nil || locked {
			t.Errorf("IsLocked at the end = %v, %v", locked, err)
		}
	})
}

// TestRWReadersWakeTogether: five readers on five clients wait for a
// writer; its release wakes them all at once, and they all hold the read
// side together.
func TestRWReadersWakeTogether(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const n = 5
		ctx := context.Background()
		d := def(t, lockrt.ReadWrite, 30*time.Second, true, time.Minute)
		k := key(t)
		w, err := newClient(t, b).RWLock(d, k).Write().Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var holding sync.WaitGroup
		holding.Add(n)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			c := newClient(t, b)
			wg.Add(1)
			go func() {
				defer wg.Done()
				le, err := c.RWLock(d, k).Read().Lock(ctx)
				holding.Done()
				if err != nil {
					t.Error(err)
					return
				}
				<-release
				if err := le.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
			waitWaiting(t, c, k, int64(i+1), 1)
		}
		if _, err := newClient(t, b).RWLock(d, k).Read().TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("read while written: %v", err)
		}
		released := time.Now()
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		all := make(chan struct{})
		go func() { holding.Wait(); close(all) }()
		select {
		case <-all:
			t.Logf("%d readers hold the lock %v after the writer's release", n, time.Since(released))
		case <-time.After(5 * time.Second):
			t.Fatal("the readers were not all woken by the writer's release")
		}
		if _, err := newClient(t, b).RWLock(d, k).Write().TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("write while read: %v", err)
		}
		close(release)
		wg.Wait()
	})
}

// TestRWDowngradeUpgrade: the writer may take the read side; Downgrade
// turns its write lease into a read lease with no writer able to slip in; a reader asking for the
// write side gets ErrUpgrade at once; both sides are reentrant.
func TestRWDowngradeUpgrade(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := def(t, lockrt.ReadWrite, 5*time.Second, true, 5*time.Second)
		k := key(t)
		rw := newClient(t, b).RWLock(d, k)
		other := newClient(t, b).RWLock(d, k)

		w, err := rw.Write().Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w2, err := rw.Write().TryLock(w.Context(), 0)
		if err != nil {
			t.Fatalf("write re-entry: %v", err)
		}
		if err := w2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wr, err := rw.Read().TryLock(w.Context(), 0)
		if err != nil {
			t.Fatalf("read by the writer: %v", err)
		}
		if _, err := other.Read().TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("another reader while written: %v", err)
		}
		if err := wr.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := w.Downgrade(ctx)
		if err != nil {
			t.Fatalf("downgrade: %v", err)
		}
		if err := r.Context().Err(); err != nil {
			t.Fatalf("read lease ended with the write lease: %v", context.Cause(r.Context()))
		}
		if err := w.Unlock(ctx); !errors.Is(err, lockrt.ErrNotHeld) {
			t.Fatalf("unlock of the downgraded write lease: %v, want ErrNotHeld", err)
		}
		if _, err := r.Downgrade(ctx); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("downgrade of a read lease: %v, want ErrInvalidArgument", err)
		}
		if _, err := other.Write().TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("another writer after the downgrade: %v", err)
		}
		r2, err := other.Read().TryLock(ctx, 0)
		if err != nil {
			t.Fatalf("another reader after the downgrade: %v", err)
		}

		start := time.Now()
		if _, err := rw.Write().Lock(r.Context()); !errors.Is(err, lockrt.ErrUpgrade) {
			t.Fatalf("upgrade: err = %v, want ErrUpgrade", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("upgrade refused after %v, want at once", d)
		}
		r3, err := rw.Read().TryLock(r.Context(), 0)
		if err != nil {
			t.Fatalf("read re-entry: %v", err)
		}
		for _, le := range []*lockrt.Lease{r3, r, r2} {
			if err := le.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Unlock(ctx); !errors.Is(err, lockrt.ErrNotHeld) {
			t.Fatalf("second unlock: %v", err)
		}
		if locked, err := rw.IsLocked(ctx); err != nil || locked {
			t.Fatalf("IsLocked after every release = %v, %v", locked, err)
		}
	})
}

// TestRWDeadReader: a reader that dies loses its share when its own lease
// runs out, without shortening the live readers' leases; a writer waiting
// for a dead reader gets the lock at its lease's end, not later.
func TestRWDeadReader(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		// Renewed every lease/3: a live hold survives a stall of the
		// machine shorter than 2/3 of it.
		const lease = 2 * time.Second
		d := def(t, lockrt.ReadWrite, lease, true, 10*time.Second)
		k := key(t)

		rdb := b.new()
		dying := lockrt.New(rdb)
		if _, err := dying.RWLock(d, k).Read().Lock(ctx); err != nil {
			t.Fatal(err)
		}
		live, err := newClient(t, b).RWLock(d, k).Read().Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dying.Close() // no more renewals, no unlock
		rdb.Close()
		died := time.Now()
		writer := newClient(t, b).RWLock(d, k).Write()
		got := make(chan time.Time, 1)
		go func() {
			le, err := writer.Lock(ctx)
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- time.Now()
			le.Unlock(ctx)
		}()
		// Past the dead reader's lease, the live one still holds.
		time.Sleep(2 * lease)
		if err := live.Context().Err(); err != nil {
			t.Fatalf("the live reader's lease ended: %v", context.Cause(live.Context()))
		}
		holds, err := newClient(t, b).Redis().ZCard(ctx, keys.Sub(k, "holds")).Result()
		if err != nil || holds != 1 {
			t.Fatalf("%d holds recorded after the dead reader's lease, want 1 (%v)", holds, err)
		}
		select {
		case <-got:
			t.Fatal("the writer got the lock while a reader held it")
		default:
		}
		released := time.Now()
		if err := live.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at, ok := <-got:
			if ok {
				t.Logf("writer served %v after the live reader's release", at.Sub(released))
			}
		case <-time.After(3 * time.Second):
			t.Fatal("writer not served after the live reader's release")
		}

		// A dead reader alone holds a writer up for its lease at most.
		rdb = b.new()
		dying = lockrt.New(rdb)
		if _, err := dying.RWLock(d, k).Read().Lock(ctx); err != nil {
			t.Fatal(err)
		}
		dying.Close()
		rdb.Close()
		died = time.Now()
		le, err := writer.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waited := time.Since(died)
		t.Logf("writer served %v after the reader died (lease %v)", waited, lease)
		if waited > lease+time.Second {
			t.Errorf("writer served %v after the reader died, lease %v", waited, lease)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
