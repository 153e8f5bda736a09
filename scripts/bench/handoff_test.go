package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// contenders is how many clients fight over the lock in BenchmarkHandoff.
const contenders = 8

// handoffLibs are the libraries of BenchmarkHandoff, configured to wait.
// Neither peer has a wake-up: redsync sleeps between tries (by default
// 50-250ms at random; redsync-1ms 1ms), redislock is given
// LinearBackoff(1ms) (its default is not to retry). lockgen-1client is
// lockgen with the contenders sharing one runtime client, as the
// goroutines of one process would.
var handoffLibs = []lib{lockgenReentrant, lockgenSimple, lockgenShared, redsyncDefault, redsync1ms, redislockLinear}

// handoffResult describes n acquisitions of one lock by contending
// clients.
type handoffResult struct {
	elapsed time.Duration // from the start to the n-th acquisition
	// handoffs has one sample per acquisition after the first: the time
	// from the previous holder starting its unlock to this Lock returning.
	handoffs []time.Duration
	// self flags the samples where the previous holder took the lock
	// again.
	self []bool
}

// handoff runs one goroutine per locker, each looping lock, a tiny
// critical section, unlock, on the resource id, until the lock has been taken n times.
// It fails when two lockers hold the lock at once.
func handoff(ls []locker, id string, n int) (handoffResult, error) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		start     = time.Now()
		taken     atomic.Int64 // acquisitions so far
		releasing atomic.Int64 // when the holder started unlocking, since start; 0: nobody yet
		holder    atomic.Int64 // the index+1 of the last holder
		inside    atomic.Int32 // holders now: more than one is a bug
		end       atomic.Int64 // when the lock was taken the n-th time, since start
		res       = handoffResult{handoffs: make([]time.Duration, n), self: make([]bool, n)}
		errs      = make([]error, len(ls))
		wg        sync.WaitGroup
	)
	for i, l := range ls {
		wg.Go(func() {
			for {
				if err := l.lock(ctx, id); err != nil {
					if ctx.Err() == nil {
						errs[i] = fmt.Errorf("locker %d: lock: %w", i, err)
						stop()
					}
					return
				}
				// The critical section.
				now := time.Since(start)
				if inside.Add(1) != 1 {
					errs[i] = fmt.Errorf("locker %d: two holders at once", i)
					stop()
				}
				k := taken.Add(1)
				if k <= int64(n) {
					res.handoffs[k-1] = now - time.Duration(releasing.Load())
					res.self[k-1] = holder.Swap(int64(i+1)) == int64(i+1)
				}
				if k == int64(n) {
					end.Store(int64(now))
					stop()
				}
				inside.Add(-1)
				releasing.Store(int64(time.Since(start)))
				if err := l.unlock(context.Background()); err != nil {
					errs[i] = errors.Join(errs[i], fmt.Errorf("locker %d: unlock: %w", i, err))
					stop()
					return
				}
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	res.elapsed = time.Duration(end.Load())
	// The first acquisition is no hand-off.
	res.handoffs, res.self = res.handoffs[1:], res.self[1:]
	return res, nil
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// stats returns the hand-offs' 50th and 99th percentiles in µs, those of
// the hand-offs to another client (NaN when there was none), and the
// share of hand-offs to the same client in %.
func (r handoffResult) stats() (p50, p99, xp50, xp99, selfPct float64) {
	all := slices.Clone(r.handoffs)
	var cross []time.Duration
	for i, d := range r.handoffs {
		if !r.self[i] {
			cross = append(cross, d)
		}
	}
	slices.Sort(all)
	slices.Sort(cross)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	p50, p99 = us(percentile(all, 50)), us(percentile(all, 99))
	xp50, xp99 = math.NaN(), math.NaN()
	if len(cross) > 0 {
		xp50, xp99 = us(percentile(cross, 50)), us(percentile(cross, 99))
	}
	if len(all) > 0 {
		selfPct = 100 * float64(len(all)-len(cross)) / float64(len(all))
	}
	return
}

// openN opens n lockers of lib, each on its own connection unless lib
// groups them.
func openN(tb testing.TB, lib lib, n int) []locker {
	if lib.group != nil {
		return lib.group(tb, n)
	}
	ls := make([]locker, n)
	for i := range ls {
		ls[i] = lib.open(tb, newRedis(tb))
	}
	return ls
}

// BenchmarkHandoff: 8 clients take turns on one lock, b.N acquisitions
// in all. It reports the hand-off latency (from a holder starting its
// unlock to the next Lock returning) over all hand-offs and over those to
// another client (xp50, xp99), the share of hand-offs where the releaser
// took the lock straight back (self-%), and acquisitions per second.
func BenchmarkHandoff(b *testing.B) {
	flush(b)
	for _, lib := range handoffLibs {
		b.Run(lib.name, func(b *testing.B) {
			ls := openN(b, lib, contenders)
			b.ResetTimer()
			res, err := handoff(ls, fmt.Sprintf("h%d", b.N), b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			p50, p99, xp50, xp99, self := res.stats()
			b.ReportMetric(p50, "p50-µs")
			b.ReportMetric(p99, "p99-µs")
			if !math.IsNaN(xp50) {
				b.ReportMetric(xp50, "xp50-µs")
				b.ReportMetric(xp99, "xp99-µs")
			}
			b.ReportMetric(self, "self-%")
			b.ReportMetric(float64(b.N)/res.elapsed.Seconds(), "ops/s")
		})
	}
}
