package spec

import (
	"strings"
	"time"
)

// This file is the limiters: section: its row of the kind table, its
// objects' type and the parse function that reads them.

func init() {
	register(&Kind{
		Order:   4,
		Section: "limiters", Noun: "limiter",
		Example: `API: { key: "api:{userID}", params: { userID: string }, algorithm: gcra, rate: 100, per: 1m }`,
		Fields: fieldsOf(Field{"algorithm", Behaviour}, Field{"rate", Behaviour}, Field{"per", Behaviour},
			Field{"burst", Behaviour}, Field{"scope", Behaviour}, Field{"idleTTL", Behaviour}),
		SpecField:  "Limiters",
		parse:      parseLimiter,
		Doc:        "A rate limiter.",
		SectionDoc: "Rate limiters by exported Go name.",
		FieldSchemas: map[string]string{
			"algorithm": `{"enum": ["gcra", "token-bucket", "sliding-window"], "description": "The limiting algorithm."}`,
			"rate":      `{"$ref": "#/$defs/count", "description": "How many requests are allowed per period."}`,
			"per":       `{"$ref": "#/$defs/duration", "description": "The period of the rate, e.g. 1m."}`,
			"burst":     `{"type": "integer", "minimum": 0, "maximum": 2147483647, "default": 0, "description": "How many requests may come at once above the rate. Default 0; sliding-window has none."}`,
			"scope":     `{"enum": ["overall", "per-client"], "default": "overall", "description": "Whether the limit is shared by all clients or applies to each. Default overall."}`,
			"idleTTL":   `{"$ref": "#/$defs/duration", "description": "The longest the limiter's keys outlive its last counted request: after that long idle it is full again. Default: until it has refilled."}`,
		},
		Required: []string{"algorithm", "rate", "per"},
		Rules:    `"if": {"properties": {"algorithm": {"const": "sliding-window"}}, "required": ["algorithm"]}, "then": {"properties": {"burst": {"const": 0}}}`,
	})
}

// Limiter algorithms.
const (
	GCRA          = "gcra"
	TokenBucket   = "token-bucket"
	SlidingWindow = "sliding-window"
)

// Limiter scopes.
const (
	ScopeOverall   = "overall"
	ScopePerClient = "per-client"
)

// Limiter is an entry of limiters:.
type Limiter struct {
	Object
	Algorithm string        `spec:"algorithm"`
	Rate      int           `spec:"rate"`
	Per       time.Duration `spec:"per"`
	Burst     int           `spec:"burst"`
	Scope     string        `spec:"scope"`
	// IdleTTL caps how long the limiter's keys outlive its last counted
	// request; 0 (the default): until it is full again.
	IdleTTL time.Duration `spec:"idleTTL"`
}

func parseLimiter(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	l := &Limiter{Object: o, Scope: ScopeOverall}
	if v, _, ok := f.oneOf("algorithm", LimiterAlgorithms); ok {
		l.Algorithm = v
	} else {
		f.missing("algorithm", "algorithm is one of "+strings.Join(LimiterAlgorithms, " | "))
	}
	if v, ok := f.integer("rate", 1); ok {
		l.Rate = v
	} else {
		f.missing("rate", "how many per period, e.g. rate: 100")
	}
	if v, ok := f.duration("per", false); ok {
		l.Per = v
	} else {
		f.missing("per", "the period of the rate, e.g. per: 1m")
	}
	if v, ok := f.integer("burst", 0); ok {
		l.Burst = v
		if l.Algorithm == SlidingWindow && v > 0 {
			p.errorf(f.m["burst"].at, "remove burst, or use gcra or token-bucket", "%s: a sliding-window limiter has no burst", f.what)
		}
	}
	if v, _, ok := f.oneOf("scope", LimiterScopes); ok {
		l.Scope = v
	}
	if v, ok := f.duration("idleTTL", false); ok {
		l.IdleTTL = v
	}
	k.append(s, l)
}
