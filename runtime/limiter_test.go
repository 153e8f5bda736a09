package runtime_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

var limiterAlgorithms = []lockrt.LimiterAlgorithm{lockrt.GCRA, lockrt.TokenBucket, lockrt.SlidingWindow}

// limiterDef returns a limiter definition; a sliding window gets no burst.
func limiterDef(t testing.TB, a lockrt.LimiterAlgorithm, rate int, per time.Duration, burst int, scope lockrt.LimiterScope) *lockrt.LimiterDef {
	if a == lockrt.SlidingWindow {
		burst = 0
	}
	return &lockrt.LimiterDef{
		Name: t.Name(), Algorithm: a, Rate: rate, Per: per, Burst: burst, Scope: scope,
		Scripts: lockimpl.Scripts().Limiters(a),
	}
}

// eachAlgorithm runs f as a parallel subtest per backend and algorithm.
func eachAlgorithm(t *testing.T, f func(t *testing.T, b backend, a lockrt.LimiterAlgorithm)) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, a := range limiterAlgorithms {
			t.Run(a.String(), func(t *testing.T) {
				t.Parallel()
				f(t, b, a)
			})
		}
	})
}

// TestLimiterRate: 3 clients x 2 goroutines hammer one limiter for 3
// seconds. Checked against the server timestamps of the allowed requests:
// GCRA and the token bucket never allow more than capacity + rate x
// elapsed between any two of them; the sliding window never more than
// rate in any window of length per. The first capacity requests (a full
// limiter) are allowed whatever the machine's speed. How close to the
// rate a hammered limiter gets (a throughput floor) is a cost, measured
// by TestLimiterThroughput in scripts/bench.
func TestLimiterRate(t *testing.T) {
	const clients, goroutines = 3, 2
	run := 3 * time.Second
	if testing.Short() {
		run = time.Second
	}
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		d := limiterDef(t, a, 20, 500*time.Millisecond, 5, lockrt.ScopeOverall)
		k := key(t)
		var (
			mu     sync.Mutex
			at     []int64 // server times of the allowed requests, in µs
			denied atomic.Int64
			sent   atomic.Int64
			wg     sync.WaitGroup
		)
		errs := make(chan error, clients*goroutines)
		start := time.Now()
		end := start.Add(run)
		for range clients {
			l := newClient(t, b).Limiter(d, k)
			for range goroutines {
				wg.Go(func() {
					for time.Now().Before(end) {
						sent.Add(1)
						r, err := l.Allow(context.Background())
						if err != nil {
							errs <- err
							return
						}
						if !r.Allowed {
							denied.Add(1)
							continue
						}
						mu.Lock()
						at = append(at, lockrt.DecidedAt(r))
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		// The client's span brackets every decision the server made.
		span := time.Since(start)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		slices.Sort(at)
		capacity, per := d.Capacity(), d.Per.Microseconds()
		most := float64(capacity) + float64(d.Rate)*span.Seconds()/d.Per.Seconds()
		t.Logf("%d allowed (at most %.1f), %d denied in %v", len(at), most, denied.Load(), span)
		if float64(len(at)) > most {
			t.Errorf("%d allowed in %v, more than capacity %d + rate %d per %v", len(at), span, capacity, d.Rate, d.Per)
		}
		if first := min(int64(capacity), sent.Load()); int64(len(at)) < first {
			t.Errorf("only %d of %d requests allowed by a full limiter of capacity %d", len(at), sent.Load(), capacity)
		}
		if a == lockrt.SlidingWindow {
			for i := 0; i+d.Rate < len(at); i++ {
				if at[i+d.Rate]-at[i] < per {
					t.Fatalf("%d requests allowed within %dµs, the window is %dµs", d.Rate+1, at[i+d.Rate]-at[i], per)
				}
			}
			return
		}
		interval := float64(per) / float64(d.Rate)
		for i := range at {
			for j := i + 1; j < len(at); j++ {
				if float64(j-i+1) > float64(capacity)+float64(at[j]-at[i])/interval+1e-6 {
					t.Fatalf("%d requests allowed within %dµs: more than capacity %d + one per %.0fµs", j-i+1, at[j]-at[i], capacity, interval)
				}
			}
		}
	})
}

// TestLimiterFollowingCall: what a result says is what the following call
// observes. While Remaining > 0 the next request is allowed; a denied
// request is still denied halfway through its RetryAfter and allowed after
// it; after ResetAfter the limiter is full and its state key is gone.
func TestLimiterFollowingCall(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		d := limiterDef(t, a, 10, time.Second, 3, lockrt.ScopeOverall) // 4 at once, then one per 100ms
		if a == lockrt.SlidingWindow {
			d = limiterDef(t, a, 4, 400*time.Millisecond, 0, lockrt.ScopeOverall)
		}
		capacity := d.Capacity()
		c := newClient(t, b)
		l := c.Limiter(d, key(t))
		prev, err := l.Allow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !prev.Allowed || prev.Remaining != capacity-1 || prev.RetryAfter != 0 || prev.ResetAfter <= 0 {
			t.Fatalf("first request: %+v, want allowed with %d remaining", prev, capacity-1)
		}
		var r lockrt.LimitResult
		var sent time.Time // when the last request was sent: the server ran it after
		for i := 0; ; i++ {
			sent = time.Now()
			if r, err = l.Allow(ctx); err != nil {
				t.Fatal(err)
			}
			if prev.Remaining > 0 && !r.Allowed {
				t.Fatalf("request %d denied (%+v) after a result with Remaining %d", i+2, r, prev.Remaining)
			}
			if !r.Allowed {
				break
			}
			if i > 3*capacity {
				t.Fatalf("never denied: %+v", r)
			}
			prev = r
		}
		denied := time.Now()
		if r.Remaining != 0 || r.RetryAfter <= 0 || r.RetryAfter > d.Per || r.ResetAfter < r.RetryAfter {
			t.Fatalf("denied result %+v: want Remaining 0 and 0 < RetryAfter <= %v <= ResetAfter", r, d.Per)
		}
		time.Sleep(r.RetryAfter / 2) // halfway through the RetryAfter timer
		h, err := l.Allow(ctx)
		// Denied for sure only if it returned before RetryAfter had passed
		// since the denied request was sent (a loaded machine may oversleep).
		inTime := time.Now().Before(sent.Add(r.RetryAfter))
		if err != nil || (inTime && h.Allowed) {
			t.Fatalf("halfway through RetryAfter %v: %+v, %v; want denied", r.RetryAfter, h, err)
		}
		// An overslept request allowed there took the request RetryAfter
		// promised: the promise is kept, and the next would be denied.
		if !h.Allowed {
			time.Sleep(time.Until(denied.Add(r.RetryAfter))) // the RetryAfter timer runs out
			if h, err := l.Allow(ctx); err != nil || !h.Allowed {
				t.Fatalf("after RetryAfter %v: %+v, %v; want allowed", r.RetryAfter, h, err)
			}
		}

		peek, err := l.AllowN(ctx, 0)
		if err != nil || !peek.Allowed || peek.ResetAfter <= 0 || peek.ResetAfter > d.Per+d.Per/time.Duration(d.Rate) {
			t.Fatalf("AllowN(0) = %+v, %v", peek, err)
		}
		time.Sleep(peek.ResetAfter + 20*time.Millisecond)
		full, err := l.AllowN(ctx, 0)
		if err != nil || full.Remaining != capacity || full.ResetAfter != 0 {
			t.Fatalf("after ResetAfter %v: %+v, %v; want %d remaining, nothing to reset", peek.ResetAfter, full, err, capacity)
		}
		// The idle limiter's keys expire on their own: the state is gone
		// (a GCRA or token bucket state holding records, a second after
		// its last write at the latest), the config lives on for a while.
		rdb := c.Redis()
		eventually(t, 2*time.Second, func() bool {
			n, err := rdb.Exists(ctx, l.Key()+":"+a.String()).Result()
			return err == nil && n == 0
		}, "the state key of a full limiter is still there")
		// The config: the time to fill up, a second and the minute of
		// limiter_config_refresh.
		for _, k := range []string{l.Key() + ":cfg", l.Key() + ":cfgv"} {
			if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > d.Per*time.Duration(capacity)+time.Second+time.Minute {
				t.Errorf("%s TTL = %v, %v; want a TTL", k, ttl, err)
			}
		}
	})
}

// skewHook shifts, by skew, every command argument that reads as the
// client's current time (seconds, milliseconds, microseconds or
// nanoseconds since the epoch, within a day), and counts them: a client
// whose clock is skewed would send exactly those.
type skewHook struct {
	skew time.Duration
	hits atomic.Int64
}

func (h *skewHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *skewHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.shift(cmd.Args())
		return next(ctx, cmd)
	}
}

func (h *skewHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.shift(cmd.Args())
		}
		return next(ctx, cmds)
	}
}

func (h *skewHook) shift(args []any) {
	now := time.Now().UnixNano()
	for i, arg := range args {
		var v int64
		switch x := arg.(type) {
		case int:
			v = int64(x)
		case int64:
			v = x
		case string:
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				continue
			}
			v = n
		default:
			continue
		}
		for _, unit := range []time.Duration{time.Second, time.Millisecond, time.Microsecond, time.Nanosecond} {
			u, day := int64(unit), int64(24*time.Hour/unit)
			if v > now/u-day && v < now/u+day {
				args[i] = v + int64(h.skew)/u
				h.hits.Add(1)
				break
			}
		}
	}
}

// evalHook counts the scripts a client runs, leaving out what go-redis
// sends on its own (connection set-up).
type evalHook struct{ n atomic.Int64 }

func (h *evalHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *evalHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLimiterClockSkew: two clients whose clocks disagree by 14 minutes
// (every argument that looks like their time is shifted by ±7 minutes on
// the wire) take turns on one limiter and get exactly the decisions of a
// single clock: capacity requests allowed, counting down, then denied for
// about a period. A limiter that used client time would refill the bucket
// for one and starve the other.
func TestLimiterClockSkew(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		d := limiterDef(t, a, 1, time.Minute, 4, lockrt.ScopeOverall) // 5 at once, then one a minute
		if a == lockrt.SlidingWindow {
			d = limiterDef(t, a, 5, time.Minute, 0, lockrt.ScopeOverall)
		}
		k := key(t)
		var hooks []*skewHook
		var ls []*lockrt.Limiter
		for _, skew := range []time.Duration{7 * time.Minute, -7 * time.Minute} {
			c := newClient(t, b)
			h := &skewHook{skew: skew}
			c.Redis().AddHook(h)
			hooks = append(hooks, h)
			ls = append(ls, c.Limiter(d, k))
		}
		capacity := d.Capacity()
		for i := range capacity + 2 {
			who := i % 2
			r, err := ls[who].Allow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i < capacity {
				if !r.Allowed || r.Remaining != capacity-1-i {
					t.Errorf("request %d by the client %v off: %+v, want allowed with %d remaining", i+1, hooks[who].skew, r, capacity-1-i)
				}
				continue
			}
			if r.Allowed || r.Remaining != 0 || r.RetryAfter < time.Minute-5*time.Second || r.RetryAfter > time.Minute {
				t.Errorf("request %d by the client %v off: %+v, want denied for about a minute", i+1, hooks[who].skew, r)
			}
		}
		for _, h := range hooks {
			if n := h.hits.Load(); n != 0 {
				t.Errorf("the client %v off sent %d arguments that look like its clock", h.skew, n)
			}
		}
	})
}

// TestLimiterScope: per-client limiters give each runtime client its own
// allowance; overall limiters share one.
func TestLimiterScope(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		for _, scope := range []lockrt.LimiterScope{lockrt.ScopeOverall, lockrt.ScopePerClient} {
			d := limiterDef(t, a, 3, time.Minute, 2, scope) // 3 at once
			k := key(t, scope.String())
			la, lb := newClient(t, b).Limiter(d, k), newClient(t, b).Limiter(d, k)
			allow := func(l *lockrt.Limiter, n int) lockrt.LimitResult {
				t.Helper()
				r, err := l.AllowN(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			if r := allow(la, 2); !r.Allowed || r.Remaining != 1 {
				t.Fatalf("%s: a takes 2: %+v", scope, r)
			}
			shared := scope == lockrt.ScopeOverall
			want := map[bool][4]int{true: {1, 0, -1, -1}, false: {1, 2, 1, 0}}[shared]
			// b, b, a: remaining after each, -1 for denied.
			steps := []struct {
				l    *lockrt.Limiter
				want int
			}{{lb, want[1]}, {lb, want[2]}, {la, want[3]}}
			for i, s := range steps {
				r := allow(s.l, 1)
				if got := map[bool]int{true: r.Remaining, false: -1}[r.Allowed]; got != s.want {
					t.Errorf("%s: step %d: %+v, want remaining %d (-1: denied)", scope, i+1, r, s.want)
				}
			}
		}
	})
}

// TestLimiterConfigMismatch: a limiter used with another definition than
// the one stored in Redis reports ErrConfigMismatch (algorithm, rate,
// period, burst and scope all count) until one side reconfigures it; the
// requests counted so far stay counted.
func TestLimiterConfigMismatch(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		k := key(t)
		old := limiterDef(t, a, 3, time.Minute, 2, lockrt.ScopeOverall)  // 3 at once
		next := limiterDef(t, a, 2, time.Minute, 1, lockrt.ScopeOverall) // 2 at once
		lo, ln := newClient(t, b).Limiter(old, k), newClient(t, b).Limiter(next, k)
		if r, err := lo.AllowN(ctx, 3); err != nil || !r.Allowed {
			t.Fatalf("old config: %+v, %v", r, err)
		}
		_, err := ln.Allow(ctx)
		if !errors.Is(err, lockrt.ErrConfigMismatch) || !strings.Contains(err.Error(), a.String()+" 3 per 1m0s") {
			t.Fatalf("new config: err = %v, want ErrConfigMismatch naming the stored config", err)
		}
		if changed, err := ln.Reconfigure(ctx); err != nil || !changed {
			t.Fatalf("Reconfigure = %v, %v; want changed", changed, err)
		}
		if r, err := ln.Allow(ctx); err != nil || r.Allowed {
			t.Fatalf("after Reconfigure: %+v, %v; want denied (3 requests counted, capacity 2)", r, err)
		}
		if _, err := lo.Allow(ctx); !errors.Is(err, lockrt.ErrConfigMismatch) {
			t.Fatalf("old config after Reconfigure: err = %v, want ErrConfigMismatch", err)
		}
		if changed, err := ln.Reconfigure(ctx); err != nil || changed {
			t.Fatalf("second Reconfigure = %v, %v; want unchanged", changed, err)
		}
		other := lockrt.GCRA
		if a == lockrt.GCRA {
			other = lockrt.TokenBucket
		}
		for _, d := range []*lockrt.LimiterDef{
			limiterDef(t, other, 2, time.Minute, 1, lockrt.ScopeOverall),
			limiterDef(t, a, 2, time.Minute, 1, lockrt.ScopePerClient),
			limiterDef(t, a, 2, time.Hour, 1, lockrt.ScopeOverall),
		} {
			if _, err := newClient(t, b).Limiter(d, k).Allow(ctx); !errors.Is(err, lockrt.ErrConfigMismatch) {
				t.Errorf("%s: err = %v, want ErrConfigMismatch", d.Algorithm, err)
			}
		}

		// Per client: another client's Reconfigure is seen at once by a
		// client whose own state it never touched (every decision reads
		// the config key with the state).
		pk := key(t, "per-client")
		pa, pb := limiterDef(t, a, 3, time.Minute, 2, lockrt.ScopePerClient), limiterDef(t, a, 4, time.Minute, 2, lockrt.ScopePerClient)
		la, lb := newClient(t, b).Limiter(pa, pk), newClient(t, b).Limiter(pb, pk)
		if r, err := la.Allow(ctx); err != nil || !r.Allowed {
			t.Fatalf("per-client Allow: %+v, %v", r, err)
		}
		if changed, err := lb.Reconfigure(ctx); err != nil || !changed {
			t.Fatalf("another client's Reconfigure = %v, %v; want changed", changed, err)
		}
		if _, err := la.Allow(ctx); !errors.Is(err, lockrt.ErrConfigMismatch) {
			t.Fatalf("per-client Allow after another client's Reconfigure: err = %v, want ErrConfigMismatch", err)
		}
	})
}

// TestLimiterTokenBucketHashState: a token bucket's state in the hash
// form of versions before the string one reads as a full bucket, and the
// decision replaces it with the string form.
func TestLimiterTokenBucketHashState(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 20*time.Second)
	c := newClient(t, backends()[0])
	k := key(t)
	state := keys.Sub(k, "token-bucket")
	d := limiterDef(t, lockrt.TokenBucket, 1, time.Minute, 1, lockrt.ScopeOverall) // 2 at once
	if err := c.Redis().HSet(ctx, state, "tokens", "0", "ts", "1", "ops", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Limiter(d, k).Allow(ctx); err != nil || !r.Allowed || r.Remaining != 1 {
		t.Fatalf("Allow over a hash state: %+v, %v; want allowed, 1 remaining", r, err)
	}
	if typ, err := c.Redis().Type(ctx, state).Result(); err != nil || typ != "string" {
		t.Fatalf("state type %q (%v), want string", typ, err)
	}
}

// TestLimiterRoundTrips: every operation is one command; a request above
// the capacity or a negative count fails without any.
func TestLimiterRoundTrips(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		d := limiterDef(t, a, 3, time.Minute, 2, lockrt.ScopePerClient) // 3 at once
		c := newClient(t, b)
		if err := c.Preload(ctx, d.Scripts.Allow, d.Scripts.Configure); err != nil {
			t.Fatal(err)
		}
		h := &countHook{}
		c.Redis().AddHook(h)
		l := c.Limiter(d, key(t))
		if _, err := l.AllowN(ctx, 4); !errors.Is(err, lockrt.ErrExceedsCapacity) {
			t.Fatalf("AllowN(4) with capacity 3: err = %v, want ErrExceedsCapacity", err)
		}
		if err := l.WaitN(ctx, 4); !errors.Is(err, lockrt.ErrExceedsCapacity) {
			t.Fatalf("WaitN(4) with capacity 3: err = %v, want ErrExceedsCapacity", err)
		}
		if _, err := l.AllowN(ctx, -1); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("AllowN(-1): err = %v, want ErrInvalidArgument", err)
		}
		if _, err := l.Refund(ctx, 4); !errors.Is(err, lockrt.ErrExceedsCapacity) {
			t.Fatalf("Refund(4) with capacity 3: err = %v, want ErrExceedsCapacity", err)
		}
		if _, err := l.Refund(ctx, 0); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("Refund(0): err = %v, want ErrInvalidArgument", err)
		}
		if n := h.n.Load(); n != 0 {
			t.Fatalf("refused requests sent %d commands", n)
		}
		ops := []struct {
			name string
			do   func() error
		}{
			{"AllowN(3)", func() error { _, err := l.AllowN(ctx, 3); return err }},
			{"Allow denied", func() error { _, err := l.Allow(ctx); return err }},
			{"AllowN(0)", func() error { _, err := l.AllowN(ctx, 0); return err }},
			{"Reconfigure", func() error { _, err := l.Reconfigure(ctx); return err }},
			{"Reset", func() error { return l.Reset(ctx) }},
			{"Wait", func() error { return l.Wait(ctx) }},
			{"Refund", func() error { _, err := l.Refund(ctx, 1); return err }},
			{"Reconfigure(ResetState)", func() error { _, err := l.Reconfigure(ctx, lockrt.ResetState()); return err }},
		}
		for i, op := range ops {
			if err := op.do(); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			if got := h.n.Load(); got != int64(i+1) {
				t.Fatalf("%s: %d commands so far, want %d", op.name, got, i+1)
			}
		}
	})
}

// TestLimiterReset: Reset makes the limiter full again; for a per-client
// limiter only the caller's allowance.
func TestLimiterReset(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		d := limiterDef(t, a, 3, time.Minute, 2, lockrt.ScopePerClient)
		k := key(t)
		la, lb := newClient(t, b).Limiter(d, k), newClient(t, b).Limiter(d, k)
		for _, l := range []*lockrt.Limiter{la, lb} {
			if r, err := l.AllowN(ctx, 3); err != nil || !r.Allowed {
				t.Fatalf("AllowN(3) = %+v, %v", r, err)
			}
		}
		if err := la.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if r, err := la.AllowN(ctx, 3); err != nil || !r.Allowed {
			t.Fatalf("after Reset: %+v, %v; want allowed", r, err)
		}
		if r, err := lb.Allow(ctx); err != nil || r.Allowed {
			t.Fatalf("another client after Reset: %+v, %v; want denied", r, err)
		}
	})
}

// TestLimiterWait: a Wait is one round trip that takes its place in line
// and sleeps until its turn: contending waiters are served at the rate,
// one round trip each; a deadline too near fails at once; cancellation
// and Close end the wait.
func TestLimiterWait(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		d := limiterDef(t, a, 20, time.Second, 0, lockrt.ScopeOverall) // one per 50ms
		if a == lockrt.SlidingWindow {
			d = limiterDef(t, a, 1, 50*time.Millisecond, 0, lockrt.ScopeOverall)
		}
		k := key(t)

		c := newClient(t, b)
		if err := c.Preload(ctx, d.Scripts.Allow); err != nil {
			t.Fatal(err)
		}
		h := &countHook{}
		c.Redis().AddHook(h)
		l := c.Limiter(d, k)
		// Timed from before the first Wait, whose grant came after: the
		// second comes 50ms after that grant, however late the first
		// Wait returned.
		start := time.Now()
		if err := l.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 45*time.Millisecond {
			t.Errorf("two Waits took %v; the rate is one per 50ms", took)
		}
		if n := h.n.Load(); n != 2 {
			t.Errorf("two Waits cost %d round trips, want 2", n)
		}

		// 2 clients x 2 goroutines x 3 waits, one grant per 50ms.
		const clients, goroutines, waits = 2, 2, 3
		var wg sync.WaitGroup
		errs := make(chan error, clients*goroutines)
		hooks := make([]*evalHook, clients)
		start = time.Now()
		for i := range clients {
			c := newClient(t, b)
			hooks[i] = &evalHook{}
			c.Redis().AddHook(hooks[i])
			l := c.Limiter(d, k)
			for range goroutines {
				wg.Go(func() {
					for range waits {
						if err := l.Wait(ctx); err != nil {
							errs <- err
							return
						}
					}
				})
			}
		}
		wg.Wait()
		took := time.Since(start)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		grants := clients * goroutines * waits
		var calls int64
		for _, h := range hooks {
			calls += h.n.Load()
		}
		t.Logf("%d contended Waits: %v, %d round trips", grants, took, calls)
		if least := time.Duration(grants-1) * 45 * time.Millisecond; took < least {
			t.Errorf("%d Waits took %v, faster than the rate allows (%v)", grants, took, least)
		}
		if calls != int64(grants) {
			t.Errorf("%d Waits cost %d round trips, want one each", grants, calls)
		}

		// A deadline before the next grant fails at once.
		slow := limiterDef(t, a, 1, time.Minute, 0, lockrt.ScopeOverall)
		ls := c.Limiter(slow, key(t, "slow"))
		if err := ls.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		start = time.Now()
		if err := ls.Wait(dctx); !errors.Is(err, lockrt.ErrLimited) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait with a near deadline: err = %v, want ErrLimited at once", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Wait with a near deadline took %v, want at once", took)
		}
		// Cancellation ends the sleep.
		cctx, cancel := context.WithCancel(ctx)
		start = time.Now() // before the timer: the cancel comes 100ms after at least
		time.AfterFunc(100*time.Millisecond, cancel)
		if err := ls.Wait(cctx); !errors.Is(err, lockrt.ErrLimited) || !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Wait: err = %v, want ErrLimited and context.Canceled", err)
		}
		if took := time.Since(start); took < 90*time.Millisecond || took > 5*time.Second {
			t.Errorf("cancelled Wait returned after %v, want about 100ms", took)
		}
		// So does Close.
		cc := newClient(t, b)
		time.AfterFunc(100*time.Millisecond, func() { cc.Close() })
		if err := cc.Limiter(slow, key(t, "slow")).Wait(ctx); !errors.Is(err, lockrt.ErrClosed) {
			t.Errorf("Wait across Close: err = %v, want ErrClosed", err)
		}
	})
}

// TestLimiterRefund: a refund gives requests back to the limiter, never
// above a full one.
func TestLimiterRefund(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		burst := 2
		if a == lockrt.SlidingWindow {
			burst = 0
		}
		d := limiterDef(t, a, 3, time.Hour, burst, lockrt.ScopeOverall) // 3 at once, then 3 an hour
		l := newClient(t, b).Limiter(d, key(t))
		if r, err := l.AllowN(ctx, 3); err != nil || !r.Allowed {
			t.Fatalf("AllowN(3) = %+v, %v", r, err)
		}
		if r, err := l.Allow(ctx); err != nil || r.Allowed {
			t.Fatalf("Allow of an empty limiter = %+v, %v; want denied", r, err)
		}
		if r, err := l.Refund(ctx, 2); err != nil || r.Remaining != 2 {
			t.Fatalf("Refund(2) = %+v, %v; want 2 remaining", r, err)
		}
		if r, err := l.AllowN(ctx, 2); err != nil || !r.Allowed {
			t.Fatalf("AllowN(2) after the refund = %+v, %v; want allowed", r, err)
		}
		if r, err := l.Allow(ctx); err != nil || r.Allowed {
			t.Fatalf("Allow after spending the refund = %+v, %v; want denied", r, err)
		}
		// A refund never fills the limiter above its capacity.
		if r, err := l.Refund(ctx, 3); err != nil || r.Remaining != 3 {
			t.Fatalf("Refund(3) = %+v, %v; want 3 remaining", r, err)
		}
		if r, err := l.Refund(ctx, 3); err != nil || r.Remaining != 3 || r.ResetAfter != 0 {
			t.Fatalf("Refund(3) of a full limiter = %+v, %v; want 3 remaining, full", r, err)
		}
		if r, err := l.AllowN(ctx, 3); err != nil || !r.Allowed {
			t.Fatalf("AllowN(3) = %+v, %v", r, err)
		}
		if r, err := l.Allow(ctx); err != nil || r.Allowed {
			t.Fatalf("Allow after a refund above capacity = %+v, %v; want denied", r, err)
		}
		other := limiterDef(t, a, 4, time.Hour, burst, lockrt.ScopeOverall)
		if _, err := newClient(t, b).Limiter(other, l.Key()).Refund(ctx, 1); !errors.Is(err, lockrt.ErrConfigMismatch) {
			t.Errorf("Refund under another config: err = %v, want ErrConfigMismatch", err)
		}
	})
}

// TestLimiterReconfigureState: Reconfigure keeps the requests counted by
// default, and forgets them with ResetState, in one call.
func TestLimiterReconfigureState(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		k := key(t)
		old := newClient(t, b).Limiter(limiterDef(t, a, 3, time.Hour, 2, lockrt.ScopeOverall), k)
		nd := limiterDef(t, a, 4, time.Hour, 3, lockrt.ScopeOverall)
		l := newClient(t, b).Limiter(nd, k)
		capacity := nd.Capacity()
		if r, err := old.AllowN(ctx, 3); err != nil || !r.Allowed {
			t.Fatalf("AllowN(3) = %+v, %v", r, err)
		}
		if changed, err := l.Reconfigure(ctx, lockrt.KeepState()); err != nil || !changed {
			t.Fatalf("Reconfigure(KeepState) = %v, %v; want changed", changed, err)
		}
		if r, err := l.AllowN(ctx, capacity); err != nil || r.Allowed {
			t.Fatalf("AllowN(%d) after keeping the state = %+v, %v; want denied (3 counted)", capacity, r, err)
		}
		if _, err := old.Allow(ctx); !errors.Is(err, lockrt.ErrConfigMismatch) {
			t.Fatalf("the old config after Reconfigure: err = %v, want ErrConfigMismatch", err)
		}
		if changed, err := old.Reconfigure(ctx, lockrt.ResetState()); err != nil || !changed {
			t.Fatalf("Reconfigure(ResetState) = %v, %v; want changed", changed, err)
		}
		if r, err := old.AllowN(ctx, 3); err != nil || !r.Allowed {
			t.Fatalf("AllowN(3) after resetting the state = %+v, %v; want allowed", r, err)
		}
		if changed, err := old.Reconfigure(ctx, lockrt.ResetState()); err != nil || changed {
			t.Fatalf("Reconfigure(ResetState) to the same config = %v, %v; want unchanged", changed, err)
		}
		if r, err := old.AllowN(ctx, 3); err != nil || !r.Allowed {
			t.Fatalf("AllowN(3) after resetting again = %+v, %v; want allowed", r, err)
		}
	})
}

// TestLimiterIdleTTL: with an idle TTL, the state and config expire that
// long after the last request counted, although the limiter would take an
// hour to refill; without one, the state lives until it has refilled.
func TestLimiterIdleTTL(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		ctx := context.Background()
		c := newClient(t, b)
		k := key(t)
		state := keys.Sub(k, a.String())
		d := limiterDef(t, a, 1, time.Hour, 0, lockrt.ScopeOverall)
		d.IdleTTL = 300 * time.Millisecond
		l := c.Limiter(d, k)
		if r, err := l.Allow(ctx); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
		pttl := func(key string) time.Duration {
			d, err := c.Redis().PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		if ttl := pttl(state); ttl <= 0 || ttl > d.IdleTTL {
			t.Errorf("state TTL %v, want at most the idle TTL %v", ttl, d.IdleTTL)
		}
		for _, cfg := range []string{keys.Sub(k, "cfg"), keys.Sub(k, "cfgv")} {
			if ttl := pttl(cfg); ttl <= 0 || ttl > d.IdleTTL+time.Second+time.Minute {
				t.Errorf("%s TTL %v, want at most the idle TTL + 1s + 1m", cfg, ttl)
			}
		}
		if r, err := l.Allow(ctx); err != nil || r.Allowed {
			t.Fatalf("second Allow = %+v, %v; want denied", r, err)
		}
		eventually(t, failAfter, func() bool { return pttl(state) == -2*time.Nanosecond }, "the state key is still there")
		if r, err := l.Allow(ctx); err != nil || !r.Allowed {
			t.Fatalf("Allow after the idle TTL = %+v, %v; want allowed", r, err)
		}

		d2 := limiterDef(t, a, 1, time.Hour, 0, lockrt.ScopeOverall)
		k2 := key(t, "default")
		if r, err := c.Limiter(d2, k2).Allow(ctx); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
		if ttl := pttl(keys.Sub(k2, a.String())); ttl < 50*time.Minute {
			t.Errorf("state TTL without an idle TTL %v, want about the hour it takes to refill", ttl)
		}
		bad := limiterDef(t, a, 1, time.Hour, 0, lockrt.ScopeOverall)
		bad.IdleTTL = -time.Second
		if _, err := c.Limiter(bad, k2).Allow(ctx); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Errorf("a negative idle TTL: err = %v, want ErrInvalidArgument", err)
		}
	})
}
