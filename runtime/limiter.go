package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

func init() {
	impl.NewLimiter = func(c any, def *impl.LimiterDef, key string) any { return c.(*Client).newLimiter(def, key) }
}

// Limiter errors.
var (
	// ErrLimited: Wait could not be allowed in time: the context ended
	// first (the error then also matches the context's error), or its
	// deadline comes before the limiter would allow the request.
	ErrLimited = errors.New("lockgen: rate limited")

	// ErrConfigMismatch: the limiter's config stored in Redis (algorithm,
	// rate, period, burst, scope) is not the one this program was generated
	// with, typically while two versions of a service are deployed. No
	// decision was made; the error says what Redis holds. Reconfigure makes
	// this program's config the limiter's.
	ErrConfigMismatch = errors.New("lockgen: limiter config in Redis differs from the spec")

	// ErrExceedsCapacity: more requests were asked for at once than the
	// limiter ever allows at once (its Capacity), so no wait could end
	// with them allowed. Redis was not contacted.
	ErrExceedsCapacity = errors.New("lockgen: request exceeds the limiter's capacity")

	// ErrNoConfig: Reconfigure with IfExists found no config stored in
	// Redis (no call stored one yet, or it expired with the idle
	// limiter), and stored none: Redisson's updateRate on a limiter that
	// does not exist.
	ErrNoConfig = errors.New("lockgen: no limiter config stored")
)

// checkLimiter reports a definition the scripts cannot work with.
func checkLimiter(d *impl.LimiterDef) error {
	switch {
	case d.Algorithm.String() == "unknown", d.Scope.String() == "unknown":
		return fmt.Errorf("%w: limiter %s has algorithm %d, scope %d", ErrInvalidArgument, d.Name, d.Algorithm, d.Scope)
	case d.Rate < 1, d.Per < time.Microsecond, d.Burst < 0:
		return fmt.Errorf("%w: limiter %s has rate %d per %v, burst %d", ErrInvalidArgument, d.Name, d.Rate, d.Per, d.Burst)
	case d.IdleTTL < 0 || (d.IdleTTL > 0 && d.IdleTTL < time.Millisecond):
		return fmt.Errorf("%w: limiter %s has idle TTL %v (0, or at least 1ms)", ErrInvalidArgument, d.Name, d.IdleTTL)
	case d.Scripts == nil || d.Scripts.Allow == nil || d.Scripts.Configure == nil:
		return fmt.Errorf("%w: limiter %s has no scripts", ErrInvalidArgument, d.Name)
	}
	return nil
}

func describeLimiter(d *impl.LimiterDef) string {
	return fmt.Sprintf("%s %d per %v burst %d %s", d.Algorithm, d.Rate, d.Per, d.Burst, d.Scope)
}

// Limiter is one distributed rate limiter: a generated constructor's
// result, such as limits.API(userID). It is a small value that does not
// contact Redis until a method is called; make as many as you like.
//
// Every decision is one script call that reads the Redis server's clock,
// never the client's: clients whose clocks disagree get the same answers.
// In Redis a limiter is its config, a hash (key:cfg, which Config reads)
// and the same as one string (key:cfgv), and its state: key:<algorithm>
// for ScopeOverall, key:<algorithm>:<client id> for ScopePerClient. A
// decision reads the config string and the state in one MGET (a sliding
// window: a GET, its state being a sorted set) and compares the config
// with the caller's definition on every call; it writes the config only
// on the first decision and when the config has less than a second (and
// the time to fill up) to live: a GCRA or token-bucket decision is then 4
// Redis commands (EVALSHA, TIME, MGET, SET), as go-redis/redis_rate's.
// The state expires on its own once the limiter is idle and full again
// (a GCRA or token bucket state at least a second after its last write:
// it holds the records below), or idle for the definition's IdleTTL; the
// config a second later, and up to a minute after that.
//
// Exactly one effect: a decision or a refund whose reply was lost, and
// which go-redis therefore sent again (MaxRetries), counts once and
// answers what its first run did. Each such call names its operation (an
// id from the client's counter; for ScopeOverall, after a tag of the
// client's id), and the script records the last eight in the state it
// writes anyway: after a GCRA limiter's arrival time ("<tat> <op>[@<at>],...")
// or a token bucket's tokens ("<tokens> <ts> <op>[@<at>],..."), as the
// names of a sliding window's requests, whose refunds go to the config
// string. The id is looked for only on a resend. It costs no Redis
// command on a decision; a resent sliding-window decision one (ZSCORE).
// A resend that comes after eight other writes of the same state, after
// a GCRA or token bucket state expired, or after a sliding window's
// request left the window, counts again (TestLimiterLostReplies).
//
// Every call returns by its context's end even when Redis stops
// answering (go-redis does not, see within); a decision or refund given
// up on that way may have been made.
type Limiter struct {
	c     *Client
	def   *impl.LimiterDef
	key   string
	cfg   string
	cfgv  string
	state string
}

// Limiter returns the limiter with the given definition (emitted by
// lockgen) and key. It does not contact Redis.
func (c *Client) newLimiter(def *impl.LimiterDef, key string) *Limiter {
	state := keys.Sub(key, def.Algorithm.String())
	if def.Scope == impl.ScopePerClient {
		state = keys.Sub(state, c.id)
	}
	return &Limiter{c: c, def: def, key: key, cfg: keys.Sub(key, "cfg"), cfgv: keys.Sub(key, "cfgv"), state: state}
}

// Key returns the limiter's key; its Redis keys are derived from it.
func (l *Limiter) Key() string { return l.key }

// Name returns the limiter's name in the spec.
func (l *Limiter) Name() string { return l.def.Name }

// LimitResult is a limiter's decision.
type LimitResult struct {
	// Allowed reports whether the requests were allowed (and counted).
	Allowed bool
	// Remaining is how many single requests the limiter would allow right
	// after this decision.
	Remaining int
	// RetryAfter is how long until the requests would be allowed when
	// they were not; 0 when they were.
	RetryAfter time.Duration
	// ResetAfter is how long until the limiter is full again (allows its
	// Capacity at once) when nothing more is asked of it.
	ResetAfter time.Duration

	at int64 // the Redis server's time of the decision, in microseconds
}

// Allow asks for one request; see AllowN.
func (l *Limiter) Allow(ctx context.Context) (LimitResult, error) { return l.AllowN(ctx, 1) }

// AllowN asks for n requests at once and counts them when they are
// allowed; n = 0 only reports Remaining and ResetAfter. A request that
// is not allowed is not an error: the result says so, with RetryAfter.
// It costs one round trip. A call whose reply was lost counts once: its
// resend answers what the first run did (see Limiter). When the context
// ends before Redis answers, it returns the context's error at once; the
// requests may have been counted.
//
// It returns ErrExceedsCapacity when n exceeds the limiter's Capacity,
// ErrInvalidArgument for a negative n or a malformed definition (both
// without contacting Redis), ErrConfigMismatch when Redis holds another
// config for this limiter, ErrClosed after the client was closed, or a
// Redis error.
func (l *Limiter) AllowN(ctx context.Context, n int) (_ LimitResult, err error) {
	ctx, end := l.c.start(ctx, OpAllow, l.def.Name)
	defer func() { end(err) }()
	if err := l.precheck(n); err != nil {
		return LimitResult{}, err
	}
	_, r, err := l.decide(ctx, n, 0)
	return r, err
}

// The codes of a decision script's reply.
const (
	denied   = 0
	allowed  = 1
	reserved = 2 // allowed after RetryAfter, and already counted
)

// decide runs the algorithm's script once. patience is how long the
// caller would wait: a request allowed within it is counted at once and
// reserved, to go ahead after RetryAfter.
func (l *Limiter) decide(ctx context.Context, n int, patience time.Duration) (int64, LimitResult, error) {
	// The decision scripts' replies, read by parse:
	// limiter_gcra reply: {int, int, int, int, int} | {int, string, string, string, string, string}
	// limiter_token_bucket reply: {int, int, int, int, int} | {int, string, string, string, string, string}
	// limiter_sliding_window reply: {int, int, int, int, int} | {int, string, string, string, string, string}
	v, err := l.run(ctx, n, patience).Slice()
	if err != nil {
		return 0, LimitResult{}, fmt.Errorf("lockgen: limiting %s: %w", l.key, err)
	}
	code, r, err := l.parse(v)
	l.c.observeDecision(ctx, l.def.Name, n, code, err)
	return code, r, err
}

// ops returns l's script operations (runtime/internal/rdb).
func (l *Limiter) ops() rdb.Limiter {
	return rdb.Limiter{Conn: &l.c.conn, Def: l.def, Config: l.cfg, State: l.state, ConfigKey: l.cfgv}
}

// run sends the algorithm's script for n requests (a negative n refunds
// -n) with patience. A call that counts or refunds names its operation
// (see opArg), so a run after the first (go-redis resends a command whose
// reply was lost) answers what the first did and changes nothing. It
// returns by ctx's end although Redis does not answer (within): the
// script may then have run, or may still.
func (l *Limiter) run(ctx context.Context, n int, patience time.Duration) *redis.Cmd {
	var op *rdb.Marked
	if n != 0 {
		op = l.opArg(n)
	}
	send := func() *redis.Cmd { return l.ops().Allow(ctx, n, patience, op) }
	return l.bounded(ctx, send)
}

// bounded returns send's command, or the context's error once ctx ends
// first: go-redis keeps a deadline on a working connection, not when the
// server stops answering (see within). A context that never ends costs
// no goroutine.
func (l *Limiter) bounded(ctx context.Context, send func() *redis.Cmd) *redis.Cmd {
	if ctx.Done() == nil {
		return send()
	}
	cmd, ok := within(ctx, send)
	if !ok {
		return lateCmd(ctx)
	}
	return cmd
}

// opArg returns the operation argument of a call that counts or refunds n
// requests: an id of this client's (newOp) when only its calls write the
// state (ScopePerClient), one unique across clients when others' do too:
// ScopeOverall's (newTaggedOp for a GCRA or token bucket state, which
// holds eight of them and is rewritten on every decision; newSharedOp for
// a sliding window, whose requests are named after it) and a sliding
// window's refund (newSharedOp: recorded in the config key every client
// shares). It is sent as an rdb.Marked: the script records it with the
// state it writes, and looks for it only on a resend.
func (l *Limiter) opArg(n int) *rdb.Marked {
	switch {
	case l.def.Scope == impl.ScopePerClient && (l.def.Algorithm != impl.SlidingWindow || n > 0):
		return &rdb.Marked{S: l.c.newOp()}
	case l.def.Algorithm != impl.SlidingWindow:
		return &rdb.Marked{S: l.c.newTaggedOp()}
	}
	return &rdb.Marked{S: l.c.newSharedOp()}
}

func (l *Limiter) precheck(n int) error {
	if err := checkLimiter(l.def); err != nil {
		return err
	}
	switch {
	case n < 0:
		return fmt.Errorf("%w: negative request count %d", ErrInvalidArgument, n)
	case n > l.def.Capacity():
		return fmt.Errorf("%w: %d requests at once, limiter %s allows %d", ErrExceedsCapacity, n, l.def.Name, l.def.Capacity())
	}
	return l.c.checkOpen()
}

// parse reads a decision script's reply.
func (l *Limiter) parse(v []any) (int64, LimitResult, error) {
	bad := func() (int64, LimitResult, error) {
		return 0, LimitResult{}, fmt.Errorf("lockgen: limiting %s: unexpected reply %v", l.key, v)
	}
	if len(v) < 5 {
		return bad()
	}
	code, ok := v[0].(int64)
	switch {
	case !ok:
		return bad()
	case code == -1:
		return 0, LimitResult{}, l.mismatch(v[1:])
	}
	var n [4]int64
	for i := range n {
		if n[i], ok = v[i+1].(int64); !ok {
			return bad()
		}
	}
	return code, LimitResult{
		Allowed:    code == allowed,
		Remaining:  int(n[0]),
		RetryAfter: time.Duration(n[1]) * time.Microsecond,
		ResetAfter: time.Duration(n[2]) * time.Microsecond,
		at:         n[3],
	}, nil
}

// mismatch describes the config Redis holds (algorithm, rate, period in
// microseconds, burst, scope) as an ErrConfigMismatch.
func (l *Limiter) mismatch(stored []any) error {
	s := make([]string, 5)
	for i := range s {
		s[i] = "?"
		if i < len(stored) {
			if str, ok := stored[i].(string); ok {
				s[i] = str
			}
		}
	}
	var per time.Duration
	if _, err := fmt.Sscan(s[2], &per); err == nil { // a number of microseconds
		s[2] = (per * time.Microsecond).String()
	}
	return fmt.Errorf("%w: %s holds %s %s per %s burst %s %s, %s has %s (Reconfigure replaces it)",
		ErrConfigMismatch, l.cfg, s[0], s[1], s[2], s[3], s[4], l.def.Name, describeLimiter(l.def))
}

// Wait waits until one request is allowed; see WaitN.
func (l *Limiter) Wait(ctx context.Context) error { return l.WaitN(ctx, 1) }

// WaitN waits until n requests are allowed at once. It costs one round
// trip: when the requests are not allowed now, the limiter counts them at
// the time they will be (they take their place in line, so waiters are
// served in order and at the rate) and WaitN sleeps until then. A wait
// cut short by the context or Close still used its place. A decision
// whose reply was lost takes one place: its resend answers the first
// run's, with the time left until it (see Limiter); a context that ends
// before Redis answers returns ErrLimited at once (a place may have been
// taken).
//
// It returns ErrLimited when the context's deadline comes before the
// requests would be allowed (at once, without waiting) or the context
// ended the wait (the error then also matches the context's error),
// ErrClosed when the client was closed, and the errors of AllowN.
func (l *Limiter) WaitN(ctx context.Context, n int) (err error) {
	ctx, end := l.c.start(ctx, OpAllow, l.def.Name)
	defer func() { end(err) }()
	if err := l.precheck(n); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrLimited, context.Cause(ctx))
	}
	patience := time.Duration(math.MaxInt64)
	if dl, ok := ctx.Deadline(); ok {
		patience = time.Until(dl)
	}
	code, r, err := l.decide(ctx, n, patience)
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrLimited, context.Cause(ctx))
	case err != nil:
		return err
	case code == allowed:
		return nil
	case code == denied:
		return fmt.Errorf("%w: %s allows %d in %v, after the context's deadline", ErrLimited, l.def.Name, n, r.RetryAfter)
	}
	timer := time.NewTimer(r.RetryAfter)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrLimited, context.Cause(ctx))
	case <-l.c.hub.Closed():
		return ErrClosed
	}
}

// Refund gives n requests counted before back to the limiter, as if they
// had not been made (work that was allowed and then not done): a GCRA
// limiter moves its arrival time back, a token bucket gets n tokens, a
// sliding window forgets its n latest entries. The limiter never holds
// more than when full, so a refund of requests that already refilled
// changes nothing. For ScopePerClient, it is the caller's allowance. The
// result's Remaining and ResetAfter say where the limiter stands; it is
// one round trip. A refund whose reply was lost gives back n once (see
// Limiter); one cut short by the context's end may have been made.
//
// It returns ErrInvalidArgument for n < 1 or a malformed definition,
// ErrExceedsCapacity when n exceeds the limiter's Capacity (neither
// contacts Redis), ErrConfigMismatch when Redis holds another config,
// ErrClosed, or a Redis error.
func (l *Limiter) Refund(ctx context.Context, n int) (LimitResult, error) {
	if n < 1 {
		return LimitResult{}, fmt.Errorf("%w: refund %d", ErrInvalidArgument, n)
	}
	if err := l.precheck(n); err != nil {
		return LimitResult{}, err
	}
	v, err := l.run(ctx, -n, 0).Slice()
	if err != nil {
		return LimitResult{}, fmt.Errorf("lockgen: refunding %s: %w", l.key, err)
	}
	_, r, err := l.parse(v)
	return r, err
}

// Reset forgets the requests counted so far, so the limiter is full
// again (for ScopePerClient, this client's allowance). The config stays.
// It costs one round trip and returns a Redis error, if any, or the
// context's when it ends first (the state may have been deleted).
func (l *Limiter) Reset(ctx context.Context) error {
	if err := l.bounded(ctx, func() *redis.Cmd {
		cmd := redis.NewCmd(ctx, "del", l.state)
		_ = l.c.rdb.Process(ctx, cmd)
		return cmd
	}).Err(); err != nil {
		return fmt.Errorf("lockgen: resetting %s: %w", l.key, err)
	}
	return nil
}

// ReconfigureOption changes what Reconfigure does.
type ReconfigureOption func(*reconfigure)

type reconfigure struct{ reset, ifExists bool }

// KeepState makes Reconfigure keep the requests counted so far (the
// default): the new config reads them, and never allows more than a full
// limiter.
func KeepState() ReconfigureOption { return func(r *reconfigure) { r.reset = false } }

// ResetState makes Reconfigure forget the requests counted so far, in the
// same script call, so the limiter starts full under its new config (for
// ScopePerClient, the caller's allowance; see Reset). It is Redisson's
// setRate.
func ResetState() ReconfigureOption { return func(r *reconfigure) { r.reset = true } }

// IfExists makes Reconfigure change only a config stored already: on a
// limiter without one (no call stored one yet, or it expired with the
// idle limiter) it writes nothing and returns ErrNoConfig. It is
// Redisson's updateRate, which returns false and creates nothing then.
func IfExists() ReconfigureOption { return func(r *reconfigure) { r.ifExists = true } }

// Reconfigure makes this program's definition the limiter's config in
// Redis, replacing another (see ErrConfigMismatch); clients still on the
// old definition get ErrConfigMismatch from then on. The requests counted
// so far stay counted (KeepState, the default: the new config never
// allows more than a full limiter), or are forgotten with ResetState;
// with IfExists a limiter without a config is left alone. It reports
// whether the config changed; a call whose reply was lost and that
// go-redis therefore sent again answers what its first run did (the
// script keeps the call's id with the config). It costs one round trip
// and returns ErrNoConfig (IfExists), ErrInvalidArgument for a malformed
// definition, ErrClosed, or a Redis error.
func (l *Limiter) Reconfigure(ctx context.Context, opts ...ReconfigureOption) (bool, error) {
	if err := checkLimiter(l.def); err != nil {
		return false, err
	}
	if err := l.c.checkOpen(); err != nil {
		return false, err
	}
	var r reconfigure
	for _, o := range opts {
		o(&r)
	}
	// limiter_configure reply: int
	n, err := l.ops().Configure(ctx, r.reset, r.ifExists, &rdb.Marked{S: l.c.newSharedOp()}).Int()
	switch {
	case err != nil:
		return false, fmt.Errorf("lockgen: reconfiguring %s: %w", l.key, err)
	case n < 0:
		return false, fmt.Errorf("%w: %s (limiter %s): Reconfigure with IfExists stored nothing", ErrNoConfig, l.cfg, l.def.Name)
	}
	return n == 1, nil
}

// LimiterConfig is a limiter's config as Redis holds it (Config).
type LimiterConfig struct {
	// Algorithm is "gcra", "token-bucket" or "sliding-window" (as the
	// spec's algorithm field names them).
	Algorithm string
	Rate      int           // requests per Per
	Per       time.Duration // the period
	Burst     int           // GCRA and TokenBucket: allowed at once above one
	Scope     string        // "overall" or "per-client"
}

// Config returns the config stored in Redis (Redisson's getConfig): the
// one every client's calls are held to, which may be another program's
// definition (see ErrConfigMismatch), and ok true; or ok false and the
// zero LimiterConfig when none is stored yet (the first Allow, Wait,
// Refund or Reconfigure stores this program's definition) or it expired
// with the idle limiter. It is one round trip (HMGET) and writes nothing.
// It returns ErrClosed, the context's error when it ends first, or a
// Redis error.
func (l *Limiter) Config(ctx context.Context) (cfg LimiterConfig, ok bool, err error) {
	if err := l.c.checkOpen(); err != nil {
		return LimiterConfig{}, false, err
	}
	v, err := readValue(ctx, func() ([]any, error) { return l.ops().StoredConfig(ctx).Result() })
	if err != nil {
		return LimiterConfig{}, false, fmt.Errorf("lockgen: reading the config of %s: %w", l.key, err)
	}
	s := make([]string, len(v))
	for i := range v {
		s[i], _ = v[i].(string)
	}
	if len(s) != 5 || s[0] == "" {
		return LimiterConfig{}, false, nil
	}
	cfg = LimiterConfig{Algorithm: s[0], Scope: s[4]}
	var per int64
	_, e1 := fmt.Sscan(s[1], &cfg.Rate)
	_, e2 := fmt.Sscan(s[2], &per)
	_, e3 := fmt.Sscan(s[3], &cfg.Burst)
	if err := errors.Join(e1, e2, e3); err != nil {
		return LimiterConfig{}, false, fmt.Errorf("lockgen: reading the config of %s: unexpected %v: %w", l.key, s, err)
	}
	cfg.Per = time.Duration(per) * time.Microsecond
	return cfg, true, nil
}
