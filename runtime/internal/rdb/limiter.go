package rdb

import (
	"context"
	"maps"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
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
	// ConfigKey is the config as one string (<key>:cfgv), which the
	// decision scripts read with the state (see limiter_config).
	ConfigKey string
}

// Allow runs the algorithm's decision script for n requests (0 only
// reports; a negative n refunds -n) from a caller that would wait
// patience, as operation op (nil for a call that neither counts nor
// refunds):
//
//	KEYS: config, state, config key
//	ARGV: config, n, config_ttl_ms, patience_us, idle_ttl_ms, op?
//
// The caller decodes its reply (limiter_gcra, limiter_token_bucket,
// limiter_sliding_window: see their headers).
func (l Limiter) Allow(ctx context.Context, n int, patience time.Duration, op *Marked) *redis.Cmd {
	a := decisionArgs(l.Def)
	args := make([]any, 11, 12)
	args[2], args[3], args[4], args[5] = 3, l.Config, l.State, l.ConfigKey
	args[6], args[7], args[8], args[9], args[10] = a.config, n, a.configTTL, patience.Microseconds(), a.idle
	if op != nil {
		args = append(args, op)
	}
	return l.Conn.EvalArgs(ctx, l.Def.Scripts.Allow, args, 3)
}

// limiterArgs are the decision scripts' arguments that only depend on
// the definition, boxed once.
type limiterArgs struct {
	config, configTTL, idle any
}

// limiterConfig is what the arguments are made of.
type limiterConfig struct {
	algorithm impl.LimiterAlgorithm
	rate      int
	per       time.Duration
	burst     int
	scope     impl.LimiterScope
	idle      time.Duration
}

// limiterArgsOf maps each limiterConfig seen to its limiterArgs: a map
// never changed once stored (a new one replaces it), so a decision reads
// it without a lock. It grows with the distinct definitions, not with the
// calls or the *impl.LimiterDef values made.
var (
	limiterArgsOf atomic.Pointer[map[limiterConfig]*limiterArgs]
	limiterArgsMu sync.Mutex
)

// decisionArgs returns d's boxed arguments, made on the first call with
// its values.
func decisionArgs(d *impl.LimiterDef) *limiterArgs {
	k := limiterConfig{d.Algorithm, d.Rate, d.Per, d.Burst, d.Scope, d.IdleTTL}
	if m := limiterArgsOf.Load(); m != nil {
		if a := (*m)[k]; a != nil {
			return a
		}
	}
	limiterArgsMu.Lock()
	defer limiterArgsMu.Unlock()
	next := map[limiterConfig]*limiterArgs{}
	if m := limiterArgsOf.Load(); m != nil {
		if a := (*m)[k]; a != nil {
			return a
		}
		maps.Copy(next, *m)
	}
	a := &limiterArgs{config: ConfigString(d), configTTL: ConfigTTL(d), idle: idleMillis(d)}
	next[k] = a
	limiterArgsOf.Store(&next)
	return a
}

// ConfigString returns d's config as the decision scripts take it and
// the config key holds it: "<algorithm> <rate> <period_us> <burst>
// <scope>".
func ConfigString(d *impl.LimiterDef) string {
	b := make([]byte, 0, 64)
	b = append(b, d.Algorithm.String()...)
	b = strconv.AppendInt(append(b, ' '), int64(d.Rate), 10)
	b = strconv.AppendInt(append(b, ' '), d.Per.Microseconds(), 10)
	b = strconv.AppendInt(append(b, ' '), int64(d.Burst), 10)
	b = append(append(b, ' '), d.Scope.String()...)
	return string(b)
}

// Configure runs limiter_configure as operation op: it makes the
// definition's config the limiter's (with ifExists, only when one is
// stored), and resets its state when reset:
//
//	KEYS: config, state, config key
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
	return l.Conn.Eval(ctx, l.Def.Scripts.Configure, []string{l.Config, l.State, l.ConfigKey}, l.config(ConfigTTL(l.Def), flag, only, op)...)
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

// ConfigTTL is how long the config outlives the last write, at least,
// in milliseconds: longer than any state can live (the time an empty
// limiter takes to fill up), so a config is never missing while state it
// governed is still there. The scripts keep it up to a minute longer
// (limiter_config_refresh in templates/limiter.luainc), so that a
// decision rewrites it at most once a minute.
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
