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
// many keys".
//
// renewed: the holder's leases are the default, renewed by its watchdog
// (which writes its heartbeat). Once the waiting client's groups trust
// the holder (runtime/alive.go), what it sends is counted by a go-redis
// hook: heartbeats and MGETs, a script counted as the 9 commands of a
// registry_refresh at most, and the hub's health-check PING (one per
// 10s, not seen by the hook) added.
//
// fixed: the holder's leases last 10 minutes without renewal (counted by
// INFO commandstats, which then sees only the waiting client): a trusted
// group watches nobody and looks at the hold's end only.
//
// Both windows start once every group is trusted: the waiting client has
// sent no script for longer than an untrusted group's refresh period.
//
// Run it with -benchtime 1x.
func BenchmarkWaitingCostPerKey(b *testing.B) {
	window := lockrt.LiveRegistryTTL/3 + 2*time.Second
	for _, renewed := range []bool{true, false} {
		name := "fixed"
		if renewed {
			name = "renewed"
		}
		for _, keys := range []int{1, 10, 100, 1000} {
			b.Run(name+"/"+strconv.Itoa(keys), func(b *testing.B) {
				for range b.N {
					perSecond := waitingCostPerKey(b, keys, renewed, window)
					b.ReportMetric(perSecond, "cmds/s")
					b.ReportMetric(perSecond/float64(keys), "cmds/s/key")
				}
			})
		}
	}
}

// waitingCostPerKey runs BenchmarkWaitingCostPerKey's case for keys locks
// and returns the commands per second counted over window.
func waitingCostPerKey(b *testing.B, keys int, renewed bool, window time.Duration) float64 {
	n := redistest.Single(b)
	ctx := context.Background()
	d := costLockDef(b, lockimpl.Reentrant, 0)
	if !renewed {
		d.Lease, d.Renew = 10*time.Minute, false
	}
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
	sent := &sentCounter{n: map[string]int64{}}
	rdb.AddHook(sent)
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
	defer func() { cancel(); wg.Wait() }()
	// Every group trusted: no script sent for longer than an untrusted
	// group's refresh period.
	sent.waitQuiet(b, lockrt.LiveRegistryTTL/3+lockrt.BeatEvery)
	if !renewed {
		w := countWindow(b, admin, window)
		perSecond := w.perSecond()
		b.Logf("fixed leases: one client waiting on %d locks for %v: %d scripts, %d commands and %d pings: %.2f commands per second (%.3f per lock) %v",
			keys, window, w.scripts(), w.commands, w.pings, perSecond, perSecond/float64(keys), w.calls)
		return perSecond
	}
	before := sent.snapshot()
	time.Sleep(window) // the window the cost is counted over
	after := sent.snapshot()
	var scripts, commands int64
	for name, v := range after {
		v -= before[name]
		if name == "evalsha" || name == "eval" {
			scripts += v
		} else {
			commands += v
		}
	}
	pings := int64(window / (10 * time.Second)) // the hub's health check
	perSecond := float64(commands+9*scripts+pings) / window.Seconds()
	b.Logf("renewed leases: one client waiting on %d locks for %v: %d scripts, %d other commands, %d pings: %.2f commands per second (%.4f per lock)",
		keys, window, scripts, commands, pings, perSecond, perSecond/float64(keys))
	return perSecond
}

// sentCounter counts the commands a client sends, by name.
type sentCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (h *sentCounter) add(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		h.n[c.Name()]++
	}
}

func (h *sentCounter) snapshot() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[string]int64, len(h.n))
	for k, v := range h.n {
		m[k] = v
	}
	return m
}

func (h *sentCounter) scripts() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n["evalsha"] + h.n["eval"]
}

// waitQuiet waits until the counted clients have sent no script for
// quiet (their groups of waiters are trusted, or at rest), three minutes
// at most.
func (h *sentCounter) waitQuiet(tb testing.TB, quiet time.Duration) {
	tb.Helper()
	last, since := h.scripts(), time.Now()
	for end := time.Now().Add(3 * time.Minute); time.Since(since) < quiet; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			tb.Fatalf("the waiting clients still send scripts after 3 minutes")
		}
		if n := h.scripts(); n != last {
			last, since = n, time.Now()
		}
	}
}

func (h *sentCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *sentCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.add(cmd); return next(ctx, cmd) }
}
func (h *sentCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.add(cmds...); return next(ctx, cmds) }
}
