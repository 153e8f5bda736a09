package templates

// Every limiter algorithm's decision script takes the same KEYS (the
// config hash and the state key, in one slot) and ARGV, and gives the same
// reply, so the runtime drives them the same way; each script's header
// states them. A request that would be allowed within patience is counted
// at once and reported with code 2: the caller goes ahead after retry
// after (Wait). Every decision reads the Redis server's clock (TIME); no
// client time is ever passed.

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
