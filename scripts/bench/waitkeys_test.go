package bench

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// BenchmarkWaitingCostPerKey: what one waiting client (its own go-redis
// and runtime Client) costs Redis per second while it waits on K
// different locks, one waiter each, that another client holds. Issue 27
// wants at most one command per second per waiting client "on however
// many keys"; a client keeps its place in each lock's registry with one
// refresh per lock and refresh period, so the cost grows with K. The
// holder's leases last 10 minutes without renewal, so that what is
// counted (INFO commandstats and PINGs, over a window longer than a
// refresh period) is the waiting client's. Run it with -benchtime 1x.
func BenchmarkWaitingCostPerKey(b *testing.B) {
	window := lockrt.LiveRegistryTTL/3 + 2*time.Second
	for _, keys := range []int{1, 10, 100, 1000} {
		b.Run(strconv.Itoa(keys), func(b *testing.B) {
			for range b.N {
				perSecond := waitingCostPerKey(b, keys, window)
				b.ReportMetric(perSecond, "cmds/s")
				b.ReportMetric(perSecond/float64(keys), "cmds/s/key")
			}
		})
	}
}

// waitingCostPerKey runs BenchmarkWaitingCostPerKey's case for keys locks
// and returns the commands per second counted over window.
func waitingCostPerKey(b *testing.B, keys int, window time.Duration) float64 {
	n := redistest.Single(b)
	ctx := context.Background()
	d := costLockDef(b, lockimpl.Reentrant, 0)
	d.Lease, d.Renew = 10*time.Minute, false
	admin := n.Client()
	holder := lockrt.New(n.Client())
	defer holder.Close()
	ks := make([]string, keys)
	for i := range ks {
		ks[i] = costKey(b, strconv.Itoa(i))
		if _, err := lockimpl.NewLock(holder, d, ks[i]).Lock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	c := lockrt.New(rdb)
	defer func() { c.Close(); rdb.Close() }()
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Go(func() {
			if _, err := lockimpl.NewLock(c, d, k).Lock(wctx); err == nil {
				b.Errorf("%s: taken while held", k)
			}
		})
	}
	for _, k := range ks {
		waitQueued(b, admin, k, 1)
	}
	w := countWindow(b, admin, window)
	perSecond := w.perSecond()
	b.Logf("one client waiting on %d locks for %v: %d scripts, %d commands and %d pings: %.2f commands per second (%.3f per lock) %v",
		keys, window, w.scripts(), w.commands, w.pings, perSecond, perSecond/float64(keys), w.calls)
	cancel()
	wg.Wait()
	return perSecond
}
