package runtime

import "time"

// WithStatsEvery is WithStats flushing every d, from d after New.
func WithStatsEvery(namespace string, d time.Duration) Option {
	return func(c *Client) {
		WithStats(namespace)(c)
		if c.stats != nil {
			c.stats.every = d
		}
	}
}
