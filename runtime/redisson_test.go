package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// The calls of issue 30 item 5: what Redisson users miss.

// TestItemTooLarge: an offer of an item above the client's limit returns
// ErrItemTooLarge naming the size and the limit, for every kind of offer,
// and sends nothing: no key of the queue exists, and no item of a batch
// with one too large was added.
func TestItemTooLarge(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 20*time.Second)
	rdb := backends()[0].new()
	t.Cleanup(func() { rdb.Close() })
	log := &cmdLog{}
	rdb.AddHook(log)
	const limit = 64
	c := lockrt.New(rdb, lockrt.WithMaxItemSize(limit))
	t.Cleanup(func() { c.Close() })
	big, small := strings.Repeat("x", 2*limit), "ok"

	pk, rk := key(t, "plain"), key(t, "reliable")
	plain := lockrt.NewDelayedQueue(c, queueDef(t, true, 0, 0), lockrt.JSON[string]{}, pk)
	rel := lockrt.NewDelayedReliableQueue(c, queueDef(t, true, time.Minute, 3), lockrt.JSON[string]{}, rk)
	calls := map[string]func() error{
		"Queue.Offer":                  func() error { return plain.Offer(ctx, big) },
		"Queue.OfferMany":              func() error { return plain.OfferMany(ctx, small, big) },
		"DelayedQueue.OfferIn":         func() error { return plain.OfferIn(ctx, big, time.Hour) },
		"DelayedQueue.OfferAt":         func() error { return plain.OfferAt(ctx, big, time.Now().Add(time.Hour)) },
		"ReliableQueue.Offer":          func() error { return errOnly(rel.Offer(ctx, big)) },
		"ReliableQueue.OfferMany":      func() error { return errOnly(rel.OfferMany(ctx, small, big, small)) },
		"ReliableQueue.Enqueue":        func() error { return errOnly(rel.Enqueue(ctx, big, lockrt.WithKey("k", time.Minute))) },
		"DelayedReliableQueue.OfferIn": func() error { return errOnly(rel.OfferIn(ctx, big, time.Hour)) },
		"DelayedReliableQueue.OfferAt": func() error { return errOnly(rel.OfferAt(ctx, big, time.Now().Add(time.Hour))) },
	}
	log.take()
	for name, call := range calls {
		err := call()
		if !errors.Is(err, lockrt.ErrItemTooLarge) {
			t.Errorf("%s of an item of %d bytes: err = %v, want ErrItemTooLarge", name, len(big), err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "limit is 64") || !strings.Contains(msg, " bytes") {
			t.Errorf("%s: %q does not name the size and the limit", name, msg)
		}
	}
	if cmds := log.take(); len(cmds) != 0 {
		t.Errorf("refused offers sent %v", cmds)
	}
	for _, k := range []string{pk, rk} {
		if n, err := rdb.Keys(ctx, k+"*").Result(); err != nil || len(n) != 0 {
			t.Errorf("keys of %s after refused offers: %v, %v; want none", k, n, err)
		}
	}
	// Items within the limit still go.
	if err := plain.OfferMany(ctx, small, small); err != nil {
		t.Fatal(err)
	}
	if _, err := rel.OfferIn(ctx, small, time.Hour); err != nil {
		t.Fatal(err)
	}
	if st, err := rel.Stats(ctx); err != nil || st.Delayed != 1 {
		t.Errorf("reliable queue after a good offer: %+v, %v; want 1 delayed", st, err)
	}
	if n, err := plain.Len(ctx); err != nil || n != 2 {
		t.Errorf("plain queue after a good offer: %d, %v; want 2", n, err)
	}
}

// TestDefaultMaxItemSize: without WithMaxItemSize the limit is Redis'
// proto-max-bulk-len, 512 MB.
func TestDefaultMaxItemSize(t *testing.T) {
	if lockrt.DefaultMaxItemSize != 512*1024*1024 {
		t.Errorf("DefaultMaxItemSize = %d, want 512 MB", lockrt.DefaultMaxItemSize)
	}
}

// TestLimiterConfig: Config reads what Redis holds (nothing before a call
// stored it); Reconfigure with IfExists stores nothing on a limiter without
// a config (ErrNoConfig) and replaces a stored one.
func TestLimiterConfig(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := withTimeout(t, 20*time.Second)
		rdb := b.new()
		t.Cleanup(func() { rdb.Close() })
		c := lockrt.New(rdb)
		t.Cleanup(func() { c.Close() })
		k := key(t)
		d1, d2 := limiterDef(t, a, 10, time.Second, 2, lockrt.ScopeOverall), limiterDef(t, a, 20, time.Minute, 3, lockrt.ScopePerClient)
		l1, l2 := lockimpl.NewLimiter(c, d1, k), lockimpl.NewLimiter(c, d2, k)

		if cfg, ok, err := l1.Config(ctx); err != nil || ok || cfg != (lockrt.LimiterConfig{}) {
			t.Fatalf("Config before any call: %+v, %v, %v; want none", cfg, ok, err)
		}
		if changed, err := l2.Reconfigure(ctx, lockrt.IfExists()); !errors.Is(err, lockrt.ErrNoConfig) || changed {
			t.Fatalf("Reconfigure(IfExists) of a limiter without config: %v, %v; want ErrNoConfig", changed, err)
		}
		if n, err := rdb.Exists(ctx, keys.Sub(k, "cfg")).Result(); err != nil || n != 0 {
			t.Fatalf("Reconfigure(IfExists) of a limiter without config stored one: %d, %v", n, err)
		}

		if _, err := l1.Allow(ctx); err != nil {
			t.Fatal(err)
		}
		want := lockrt.LimiterConfig{Algorithm: a.String(), Rate: 10, Per: time.Second, Burst: d1.Burst, Scope: "overall"}
		if cfg, ok, err := l2.Config(ctx); err != nil || !ok || cfg != want {
			t.Fatalf("Config after l1's Allow: %+v, %v, %v; want %+v", cfg, ok, err, want)
		}
		if changed, err := l2.Reconfigure(ctx, lockrt.IfExists()); err != nil || !changed {
			t.Fatalf("Reconfigure(IfExists) of a stored config: %v, %v; want changed", changed, err)
		}
		want = lockrt.LimiterConfig{Algorithm: a.String(), Rate: 20, Per: time.Minute, Burst: d2.Burst, Scope: "per-client"}
		if cfg, ok, err := l1.Config(ctx); err != nil || !ok || cfg != want {
			t.Fatalf("Config after Reconfigure: %+v, %v, %v; want %+v", cfg, ok, err, want)
		}
		if changed, err := l2.Reconfigure(ctx, lockrt.IfExists()); err != nil || changed {
			t.Fatalf("Reconfigure(IfExists) again: %v, %v; want unchanged", changed, err)
		}
		if _, err := l1.Allow(ctx); !errors.Is(err, lockrt.ErrConfigMismatch) {
			t.Fatalf("Allow of the old definition: %v, want ErrConfigMismatch", err)
		}
	})
}

// TestLimiterConfigureTwice: limiter_configure run twice as one call (the
// second send marked '!', as go-redis' resend after a lost reply is)
// answers the first run's reply and changes nothing: the state counted
// after the first run stays although the call resets it.
func TestLimiterConfigureTwice(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 20*time.Second)
	rdb := backends()[0].new()
	t.Cleanup(func() { rdb.Close() })
	c := lockrt.New(rdb)
	t.Cleanup(func() { c.Close() })
	k := key(t)
	d := limiterDef(t, lockrt.TokenBucket, 10, time.Second, 2, lockrt.ScopeOverall)
	l := lockimpl.NewLimiter(c, d, k)
	if _, err := l.Allow(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, state := keys.Sub(k, "cfg"), keys.Sub(k, "token-bucket")
	s := script(t, "limiter_configure")
	run := func(op, ifExists string, cfgKey string) int64 {
		t.Helper()
		// KEYS: config, state, config key; ARGV: algorithm, rate,
		// period_us, burst, scope, config_ttl_ms, reset, if_exists, op
		n, err := rdb.Eval(ctx, s.Source, []string{cfgKey, state, cfgKey + "v"}, "token-bucket", 30, 1_000_000, 2, "overall", 60_000, "1", ifExists, op).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := run("op1", "0", cfg); n != 1 {
		t.Fatalf("first run: %d, want 1 (changed)", n)
	}
	// Counted after the first run: a second run that reset again would
	// forget it.
	if err := rdb.HSet(ctx, state, "tokens", "0.5").Err(); err != nil {
		t.Fatal(err)
	}
	if n := run("op1!", "0", cfg); n != 1 {
		t.Fatalf("second run: %d, want the first run's 1", n)
	}
	if v, err := rdb.HGet(ctx, state, "tokens").Result(); err != nil || v != "0.5" {
		t.Fatalf("state after the second run: %q, %v; want it kept", v, err)
	}
	if n := run("op2!", "0", cfg); n != 0 {
		t.Fatalf("another call marked resent: %d, want 0 (its own run: unchanged)", n)
	}
	missing := keys.Sub(key(t, "missing"), "cfg")
	for _, op := range []string{"op3", "op3!"} {
		if n := run(op, "1", missing); n != -1 {
			t.Fatalf("if_exists on a missing config (%s): %d, want -1", op, n)
		}
	}
	if n, err := rdb.Exists(ctx, missing).Result(); err != nil || n != 0 {
		t.Fatalf("if_exists on a missing config wrote it: %d, %v", n, err)
	}
}

// TestPermitLease: a permit's TTL is its lease left in Redis; SetLease
// changes it, and the watchdog renews with the new lease from then on; a
// permit not renewed ends at its new lease; a released or evicted
// permit's TTL and SetLease are ErrPermitNotHeld.
func TestPermitLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 30*time.Second)
		c := newClient(t, b)
		sem := lockimpl.NewSemaphore(c, semDef(t, 2, time.Minute, true, 0), key(t, "renewed"))
		p, err := sem.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl <= 0 || ttl > time.Minute {
			t.Fatalf("TTL of a new permit: %v, %v; want up to a minute", ttl, err)
		}
		if err := p.SetLease(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("SetLease(0): %v, want ErrInvalidArgument", err)
		}
		const lease = 600 * time.Millisecond
		if err := p.SetLease(ctx, lease); err != nil {
			t.Fatal(err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl <= 0 || ttl > lease {
			t.Fatalf("TTL after SetLease(%v): %v, %v", lease, ttl, err)
		}
		// Past the new lease twice over: renewed (every lease/3) with the
		// new lease, not the spec's minute.
		time.Sleep(2 * lease)
		if err := p.Context().Err(); err != nil {
			t.Fatalf("permit renewed with its new lease ended: %v", context.Cause(p.Context()))
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl <= 0 || ttl > lease {
			t.Fatalf("TTL of the renewed permit: %v, %v; want up to %v", ttl, err, lease)
		}
		if err := p.SetLease(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl <= lease {
			t.Fatalf("TTL after SetLease(1m): %v, %v", ttl, err)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := p.TTL(ctx); !errors.Is(err, lockrt.ErrPermitNotHeld) {
			t.Errorf("TTL of a released permit: %v, want ErrPermitNotHeld", err)
		}
		if err := p.SetLease(ctx, time.Minute); !errors.Is(err, lockrt.ErrPermitNotHeld) {
			t.Errorf("SetLease of a released permit: %v, want ErrPermitNotHeld", err)
		}
		if err := p.Release(ctx); !errors.Is(err, lockrt.ErrPermitNotHeld) {
			t.Errorf("second Release: %v, want ErrPermitNotHeld", err)
		}

		// Not renewed: the new lease ends the hold.
		sem = lockimpl.NewSemaphore(c, semDef(t, 2, time.Minute, false, 0), key(t, "fixed"))
		p, err = sem.Acquire(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		const short = 300 * time.Millisecond
		if err := p.SetLease(ctx, short); err != nil {
			t.Fatal(err)
		}
		if dl, _ := p.Context().Deadline(); time.Until(dl) > short {
			t.Errorf("the permit's context deadline is %v away, want at most %v", time.Until(dl), short)
		}
		select {
		case <-p.Context().Done():
		case <-time.After(failAfter):
			t.Fatal("the permit's context did not end at its new lease")
		}
		if !errors.Is(context.Cause(p.Context()), lockrt.ErrPermitLost) {
			t.Errorf("cause: %v, want ErrPermitLost", context.Cause(p.Context()))
		}
		eventually(t, 0, func() bool { n, err := sem.Available(ctx); return err == nil && n == 2 }, "the permits did not come back at the new lease's end")
		if _, err := p.TTL(ctx); !errors.Is(err, lockrt.ErrPermitNotHeld) {
			t.Errorf("TTL of an evicted permit: %v, want ErrPermitNotHeld", err)
		}
		if err := p.SetLease(ctx, time.Minute); !errors.Is(err, lockrt.ErrPermitNotHeld) {
			t.Errorf("SetLease of an evicted permit: %v, want ErrPermitNotHeld", err)
		}
		if err := p.Release(ctx); !errors.Is(err, lockrt.ErrPermitNotHeld) && !errors.Is(err, lockrt.ErrPermitLost) {
			t.Errorf("Release of an evicted permit: %v, want ErrPermitNotHeld or ErrPermitLost", err)
		}
	})
}

// delayedReads is what DelayedQueue and DelayedReliableQueue share for
// the tests of their reads of delayed items.
type delayedReads[T any] interface {
	opsQueue[T]
	PeekDelayed(ctx context.Context, n int) ([]lockrt.DelayedItem[T], error)
	ReadDelayed(ctx context.Context) ([]lockrt.DelayedItem[T], error)
	ContainsDelayed(ctx context.Context, v T) (bool, error)
}

// TestDelayedReads: PeekDelayed and ReadDelayed list the items not ready
// yet, due first first, with their due times; ContainsDelayed finds one;
// none of them changes anything, and each is one script call.
func TestDelayedReads(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, reliable := range []bool{false, true} {
			t.Run(fmt.Sprintf("reliable=%v", reliable), func(t *testing.T) {
				ctx := withTimeout(t, 20*time.Second)
				rdb := b.new()
				t.Cleanup(func() { rdb.Close() })
				c := lockrt.New(rdb)
				t.Cleanup(func() { c.Close() })
				k := key(t)
				var q delayedReads[string]
				if reliable {
					q = relOps[string]{lockrt.NewDelayedReliableQueue(c, queueDef(t, true, time.Minute, 3), lockrt.JSON[string]{}, k)}
				} else {
					q = lockrt.NewDelayedQueue(c, queueDef(t, true, 0, 0), lockrt.JSON[string]{}, k)
				}
				if items, err := q.ReadDelayed(ctx); err != nil || len(items) != 0 {
					t.Fatalf("ReadDelayed of an empty queue: %v, %v", items, err)
				}
				start := time.Now()
				if err := q.OfferMany(ctx, "ready"); err != nil {
					t.Fatal(err)
				}
				for _, o := range []struct {
					v string
					d time.Duration
				}{{"c", 3 * time.Hour}, {"a", time.Hour}, {"b", 2 * time.Hour}, {"a", 4 * time.Hour}} {
					if err := q.OfferIn(ctx, o.v, o.d); err != nil {
						t.Fatal(err)
					}
				}
				before, err := q.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				log := &cmdLog{}
				rdb.AddHook(log)

				all, err := q.ReadDelayed(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for i, it := range all {
					got = append(got, it.Value)
					want := start.Add(time.Duration(i+1) * time.Hour)
					if d := it.Due.Sub(want); d < -time.Second || d > 5*time.Second || it.ID == "" {
						t.Errorf("item %d (%s): due %v, id %q; want due about %v, an id", i, it.Value, it.Due, it.ID, want)
					}
				}
				if !slices.Equal(got, []string{"a", "b", "c", "a"}) {
					t.Errorf("ReadDelayed: %v, want [a b c a]", got)
				}
				first, err := q.PeekDelayed(ctx, 2)
				if err != nil || len(first) != 2 || first[0] != all[0] || first[1] != all[1] {
					t.Errorf("PeekDelayed(2): %v, %v; want %v", first, err, all[:2])
				}
				for v, want := range map[string]bool{"a": true, "b": true, "c": true, "ready": false, "none": false} {
					if got, err := q.ContainsDelayed(ctx, v); err != nil || got != want {
						t.Errorf("ContainsDelayed(%q): %v, %v; want %v", v, got, err, want)
					}
				}
				if _, err := q.PeekDelayed(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
					t.Errorf("PeekDelayed(0): %v, want ErrInvalidArgument", err)
				}
				delayed := script(t, "queue_delayed")
				for _, cmd := range without(log.take(), script(t, "queue_move")) { // the delay timer's aside
					if !strings.HasSuffix(cmd, delayed.SHA1) && !strings.HasSuffix(cmd, delayed.Source) {
						t.Errorf("a read of delayed items sent %q", cmd)
					}
				}
				after, err := q.Stats(ctx)
				if err != nil || after != before {
					t.Errorf("Stats after the reads: %+v, %v; want %+v", after, err, before)
				}
				if n, err := q.Len(ctx); err != nil || n != 1 {
					t.Errorf("Len: %d, %v; want the one ready item", n, err)
				}
			})
		}
	})
}

// TestRenewalNeverShortens: a renewal of a permit's hold only extends it,
// so one the watchdog sent with an older, shorter lease that arrives after
// SetLease made the hold longer leaves the longer lease alone (beside two
// busy loops, the old entry's last renewal landed after SetLease(1m) and
// cut the hold back to 600 ms, while the client believed it held it for a
// minute); SetLease's set mode shortens it.
func TestRenewalNeverShortens(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 30*time.Second)
		c := newClient(t, b)
		sem := lockimpl.NewSemaphore(c, semDef(t, 2, time.Minute, false, 0), key(t))
		p, err := sem.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
		// The one hold is the compact form (the counts alone, see
		// semaphore_acquire), the one the renewal must understand too.
		owner, err := c.Redis().HGet(ctx, keys.Sub(sem.Key(), "counts"), "s").Result()
		if err != nil || owner == "" {
			t.Fatalf("the compact hold's owner: %q, %v", owner, err)
		}
		ks := []string{sem.Key(), keys.Sub(sem.Key(), "counts")}
		renew := script(t, "semaphore_renew")
		if err := c.Preload(ctx, renew); err != nil { // (called by hand below)
			t.Fatal(err)
		}
		// The watchdog's renewal with a 600 ms lease, late: extend mode.
		if n, err := c.Redis().EvalSha(ctx, renew.SHA1, ks, 600, owner).Int(); err != nil || n != 1 {
			t.Fatalf("renewal: %d, %v", n, err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl <= 50*time.Second {
			t.Fatalf("TTL after a late renewal with a shorter lease: %v, %v; want the minute kept", ttl, err)
		}
		if err := p.SetLease(ctx, 600*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl > 600*time.Millisecond {
			t.Fatalf("TTL after SetLease(600ms): %v, %v", ttl, err)
		}
		// The full form: a second hold turns the compact one into it.
		if err := p.SetLease(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		p2, err := sem.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer p2.Release(ctx)
		if d, err := c.Redis().ZScore(ctx, sem.Key(), owner).Result(); err != nil || d <= 0 {
			t.Fatalf("the first hold in the full form: %v, %v", d, err)
		}
		if n, err := c.Redis().EvalSha(ctx, renew.SHA1, ks, 600, owner).Int(); err != nil || n != 1 {
			t.Fatalf("renewal: %d, %v", n, err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl <= 50*time.Second {
			t.Fatalf("TTL after a late renewal of the full form: %v, %v; want the minute kept", ttl, err)
		}
		if err := p.SetLease(ctx, 600*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if ttl, err := p.TTL(ctx); err != nil || ttl > 600*time.Millisecond {
			t.Fatalf("TTL after SetLease(600ms) of the full form: %v, %v", ttl, err)
		}
	})
}
