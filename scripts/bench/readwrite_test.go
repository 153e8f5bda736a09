package bench

// Read-lock throughput: 8 readers, each on its own client, loop taking and
// releasing the read side of one read-write lock, with and without a
// short hold. The peers have no read-write lock; lockgen's exclusive
// locks under the same load show what sharing buys.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchkinds"
)

// readers is how many goroutines BenchmarkReadLock runs.
const readers = 8

// The lockers of BenchmarkReadLock: the read and write sides of
// benchkinds' Table, and benchlocks' reentrant Resource.
var (
	lockgenRead  = lib{name: "read", open: openKinds(func(l *benchkinds.Locks, id string) *lockrt.Lock { return l.Table(id).Read() })}
	lockgenWrite = lib{name: "write", open: openKinds(func(l *benchkinds.Locks, id string) *lockrt.Lock { return l.Table(id).Write() })}
	readLibs     = []lib{lockgenRead, lockgenWrite, lockgenReentrant}
)

// lockLoop runs one goroutine per locker, each looping lock, hold, unlock
// on the resource id, until the lock has been taken n times in all. It
// returns the elapsed time and the most holders seen at once.
func lockLoop(ls []locker, id string, n int, hold time.Duration) (time.Duration, int64, error) {
	ctx := context.Background()
	var (
		taken, inside, most atomic.Int64
		errs                = make([]error, len(ls))
		wg                  sync.WaitGroup
	)
	start := time.Now()
	for i, l := range ls {
		wg.Go(func() {
			for taken.Add(1) <= int64(n) {
				if err := l.lock(ctx, id); err != nil {
					errs[i] = fmt.Errorf("locker %d: lock: %w", i, err)
					return
				}
				now := inside.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				if hold > 0 {
					time.Sleep(hold)
				}
				inside.Add(-1)
				if err := l.unlock(ctx); err != nil {
					errs[i] = fmt.Errorf("locker %d: unlock: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	return time.Since(start), most.Load(), nil
}

// BenchmarkReadLock: 8 goroutines, each with its own client, take and
// release one lock b.N times in all, holding it for nothing or for 1ms.
// It reports lock+unlock pairs per second and the most holders at once.
func BenchmarkReadLock(b *testing.B) {
	flush(b)
	for _, hold := range []time.Duration{0, time.Millisecond} {
		for _, lib := range readLibs {
			b.Run(fmt.Sprintf("%s/hold=%v", lib.name, hold), func(b *testing.B) {
				ls := openN(b, lib, readers)
				b.ResetTimer()
				elapsed, most, err := lockLoop(ls, fmt.Sprintf("r%d-%v", b.N, hold), b.N, hold)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
				b.ReportMetric(float64(most), "holders")
			})
		}
	}
}

// TestReadLock runs BenchmarkReadLock's loop briefly: readers share the
// lock, the other lockers never do.
func TestReadLock(t *testing.T) {
	for _, lib := range readLibs {
		t.Run(lib.name, func(t *testing.T) {
			ls := openN(t, lib, readers)
			_, most, err := lockLoop(ls, "test", 8*readers, time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if lib.name == lockgenRead.name && most < 2 {
				t.Errorf("readers never overlapped")
			}
			if lib.name != lockgenRead.name && most != 1 {
				t.Errorf("%d holders of an exclusive lock at once", most)
			}
		})
	}
}
