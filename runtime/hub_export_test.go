package runtime

// PublishCmd returns the command c's scripts publish wake-ups with:
// "publish" or "spublish".
func PublishCmd(c *Client) string { return c.publishCmd() }

// WithShardedPubSub lets (or forbids) a client on a Redis 7 cluster choose
// sharded pub/sub, whatever the default.
func WithShardedPubSub(on bool) Option { return func(c *Client) { c.shardedPubSub = on } }
