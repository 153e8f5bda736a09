package impl

import (
	"time"
)

// LimiterAlgorithm is how a limiter decides.
type LimiterAlgorithm int

func (a LimiterAlgorithm) String() string {
	switch a {
	case GCRA:
		return "gcra"
	case TokenBucket:
		return "token-bucket"
	case SlidingWindow:
		return "sliding-window"
	}
	return "unknown"
}

// LimiterScope says who shares a limiter's allowance.
type LimiterScope int

func (s LimiterScope) String() string {
	switch s {
	case ScopeOverall:
		return "overall"
	case ScopePerClient:
		return "per-client"
	}
	return "unknown"
}

// LimiterScripts are the scripts of one limiter algorithm. Every
// algorithm's decision script takes the same KEYS (the config hash, the
// state key and the config key, in one slot) and ARGV, and gives the
// same reply, so the runtime drives them the same way; each script's
// header states them. A request that would be allowed within patience is
// counted at once and reported with code 2: the caller goes ahead after
// retry after (Wait). Every decision reads the Redis server's clock
// (TIME); no client time is ever passed.
type LimiterScripts struct {
	Allow     *Script
	Configure *Script
}

// LimiterDef is the static definition of a limiter declared in a spec.
type LimiterDef struct {
	Name      string // the spec's name, for errors
	Algorithm LimiterAlgorithm
	Rate      int           // requests allowed per Per; at least 1
	Per       time.Duration // at least a microsecond
	Burst     int           // requests allowed at once above the rate (GCRA, TokenBucket)
	Scope     LimiterScope
	// IdleTTL bounds how long the limiter's state outlives the last
	// request counted: after IdleTTL without one, the state expires and
	// the limiter is full again, even if it would not have refilled by
	// then (a limit of 1000 per day with an IdleTTL of 1h forgets a user
	// after an idle hour). 0, the default: the state expires when the
	// limiter is full again (Per*(Burst+1)/Rate after the last request,
	// Per for SlidingWindow). The config (<key>:cfg and <key>:cfgv)
	// expires a second after the state would at the latest, and up to a
	// minute later than that (a decision rewrites it at most once a
	// minute). An IdleTTL longer than the time to fill up changes nothing.
	IdleTTL time.Duration
	Scripts *LimiterScripts
}

// Capacity returns the most requests the limiter allows at once: Burst+1
// for GCRA and TokenBucket, Rate for SlidingWindow.
func (d *LimiterDef) Capacity() int {
	if d.Algorithm == SlidingWindow {
		return d.Rate
	}
	return d.Burst + 1
}

// NewLimiter makes a rate limiter (runtime.Client's).
var NewLimiter func(c any, def *LimiterDef, key string) any

// limiterAllow names each algorithm's decision script.
var limiterAllow = map[LimiterAlgorithm]string{
	GCRA: "limiter_gcra", TokenBucket: "limiter_token_bucket", SlidingWindow: "limiter_sliding_window",
}

// Limiters returns the scripts of a limiter algorithm.
func (p *Pinned) Limiters(a LimiterAlgorithm) *LimiterScripts {
	return &LimiterScripts{Allow: p.get(limiterAllow[a]), Configure: p.get("limiter_configure")}
}

// The limiter algorithms. GCRA and TokenBucket allow the same traffic for
// the same definition: Burst+1 requests at once, then Rate per Per, spread
// evenly; they differ in what Redis holds. SlidingWindow allows at most
// Rate requests in any window of length Per.
const (
	// GCRA is the generic cell rate algorithm: the state is one number,
	// the theoretical arrival time of the next request.
	GCRA LimiterAlgorithm = iota + 1
	// TokenBucket holds Burst+1 tokens, refilled continuously at Rate per
	// Per; the state is the tokens and when they were counted.
	TokenBucket
	// SlidingWindow keeps an exact log of the requests allowed in the last
	// Per (a sorted set), so it never allows more than Rate in any window
	// of that length. Its cost grows with Rate.
	SlidingWindow
)

// The limiter scopes.
const (
	// ScopeOverall: one allowance shared by every client.
	ScopeOverall LimiterScope = iota + 1
	// ScopePerClient: every runtime Client (see WithID) has an allowance
	// of its own.
	ScopePerClient
)
