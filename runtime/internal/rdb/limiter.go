package rdb

import (
	"context"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Limiter is a rate limiter's script operations (templates/limiter_*.lua):
// a small value, made per call.
type Limiter struct {
	Conn   *Conn
	Def    *impl.LimiterDef
	Config string // the config hash (<key>:cfg)
	State  string // the state (the caller's, for a per-client limiter)
}

// Allow runs the algorithm's decision script for n requests (0 only
// reports; a negative n refunds -n) from a caller that would wait
// patience, as operation op (nil for a call that neither counts nor
// refunds):
//
//	KEYS: config, state
//	ARGV: algorithm, rate, period_us, burst, scope, n, config_ttl_ms,
//	      patience_us, idle_ttl_ms, op?
//
// The caller decodes its reply (limiter_gcra, limiter_token_bucket,
// limiter_sliding_window: see their headers).
func (l Limiter) Allow(ctx context.Context, n int, patience time.Duration, op *Marked) *redis.Cmd {
	args := l.config(n, ConfigTTL(l.Def), patience.Microseconds(), idleMillis(l.Def), op)
	if op == nil {
		args = args[:len(args)-1]
	}
	return l.Conn.Eval(ctx, l.Def.Scripts.Allow, []string{l.Config, l.State}, args...)
}

// Configure runs limiter_configure as operation op: it makes the
// definition's config the limiter's (with ifExists, only when one is
// stored), and resets its state when reset:
//
//	KEYS: config, state
//	ARGV: algorithm, rate, period_us, burst, scope, config_ttl_ms, reset,
//	      if_exists, op
//
// The caller decodes its reply (see the script's header).
func (l Limiter) Configure(ctx context.Context, reset, ifExists bool, op *Marked) *redis.Cmd {
	flag, only := flag0, flag0
	if reset {
		flag = flag1
	}
	if ifExists {
		only = flag1
	}
	return l.Conn.Eval(ctx, l.Def.Scripts.Configure, []string{l.Config, l.State}, l.config(ConfigTTL(l.Def), flag, only, op)...)
}

// ConfigFields are the fields of the config hash that hold the config, in
// the scripts' ARGV order (algorithm, rate, period_us, burst, scope).
var ConfigFields = []string{"algorithm", "rate", "per", "burst", "scope"}

// StoredConfig reads the config hash's config fields (ConfigFields): one
// HMGET, nils when none is stored.
func (l Limiter) StoredConfig(ctx context.Context) *redis.SliceCmd {
	return l.Conn.R.HMGet(ctx, l.Config, ConfigFields...)
}

// config returns the scripts' ARGV: the config, as the scripts store it,
// then extra.
func (l Limiter) config(extra ...any) []any {
	d := l.Def
	return append([]any{d.Algorithm.String(), d.Rate, d.Per.Microseconds(), d.Burst, d.Scope.String(), nil, nil, nil, nil, nil}[:5], extra...)
}

// ConfigTTL is how long the config outlives the last write, in
// milliseconds: longer than any state can live (the time an empty
// limiter takes to fill up), so a config is never missing while state it
// governed is still there.
func ConfigTTL(d *impl.LimiterDef) int64 {
	fill := d.Per
	if d.Algorithm != impl.SlidingWindow {
		fill = time.Duration(float64(d.Per) * float64(d.Burst+1) / float64(d.Rate))
	}
	if d.IdleTTL > 0 && d.IdleTTL < fill {
		fill = d.IdleTTL // the state lives no longer
	}
	return fill.Milliseconds() + 1000
}

// idleMillis is the idle TTL as the scripts take it: 0 for none.
func idleMillis(d *impl.LimiterDef) int64 {
	if d.IdleTTL <= 0 {
		return 0
	}
	return CeilMillis(d.IdleTTL)
}

// CeilMillis returns d in whole milliseconds, rounded up.
func CeilMillis(d time.Duration) int64 {
	return int64(math.Ceil(float64(d) / float64(time.Millisecond)))
}
