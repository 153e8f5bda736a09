package templates

// Calling convention of the limiter scripts. Every algorithm's decision
// script takes the same keys and arguments, so the runtime drives them the
// same way (KEYS: the config hash and the state key, in one slot):
//
//	limiter_<algorithm>(config, state; ARGV: algorithm, rate, period us, burst, scope, n, config ttl ms, patience us, idle ttl ms)
//	  -> {1 allowed | 2 allowed after retry after | 0 denied, remaining, retry after us, reset after us, server time us}
//	   | {-1, algorithm, rate, period us, burst, scope} (the stored config, when it is not the caller's)
//	  (a negative n refunds -n requests, up to a full limiter: {1, remaining, 0, reset after us, server time us})
//	limiter_configure(config, state; ARGV: algorithm, rate, period us, burst, scope, config ttl ms, '1' reset state | '0') -> 1 changed | 0 unchanged
//
// The idle TTL bounds how long the state outlives the last request counted
// (0: until the limiter is full again).
//
// A request that would be allowed within patience is counted at once and
// reported with code 2: the caller goes ahead after retry after (Wait). Every
// decision reads the Redis server's clock (TIME); no client time is ever
// passed.

// LimiterSet names the scripts of one limiter algorithm.
type LimiterSet struct {
	Allow, Configure string
}

// Names returns the set's script names in a fixed order.
func (s LimiterSet) Names() []string {
	return []string{s.Allow, s.Configure}
}

// Limiters maps each limiter algorithm (as written in a spec) to its scripts.
var Limiters = map[string]LimiterSet{
	"gcra":           {Allow: "limiter_gcra", Configure: "limiter_configure"},
	"token-bucket":   {Allow: "limiter_token_bucket", Configure: "limiter_configure"},
	"sliding-window": {Allow: "limiter_sliding_window", Configure: "limiter_configure"},
}
