package runtime

import (
	"context"
	"strings"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

// The client's side of pub/sub: which command its scripts publish with,
// and the channels its waiters wait on. The connections, subscriptions
// and waiters are the hub's (runtime/internal/hub).

// shardedPubSub enables sharded pub/sub on Redis 7 clusters by default
// (WithClassicPubSub turns it off per client). Every script that publishes
// takes its command from publishCmd.
const shardedPubSub = true

// publishCmd is the command that scripts publish wake-ups with, passed to
// them as an argument: "publish" (classic pub/sub) or "spublish" (sharded
// pub/sub, Redis Cluster >= 7.0). The choice is made once per client (see
// hub.sharded); every script that publishes takes it from here. While the
// choice cannot be probed (Redis unreachable) it says "publish".
func (c *Client) publishCmd() string {
	if !c.hub.Probed() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = c.hub.Sharded(ctx)
	}
	if c.hub.IsSharded() {
		return "spublish"
	}
	return "publish"
}

// wakePrefix returns the channel prefix of the wake-ups of key's waiters:
// a waiter on client id waits on wakePrefix(key) + ":" + id, and the
// scripts publish to the prefix they are given plus the woken member's
// client id. With sharded pub/sub it is the key's own channel, key:ch,
// in the key's slot as SPUBLISH from a script must be. With classic
// pub/sub it is the key's namespace's, <namespace>:wake, so that a client
// waits on one channel per namespace however many objects it waits on,
// and subscribes it once rather than once per object (see "Waiting" in
// docs/design.md).
func (c *Client) wakePrefix(key string) string {
	if c.publishCmd() == "spublish" {
		return keys.Sub(key, "ch")
	}
	return c.classicWake(key).Name
}

// classicWake is wakePrefix with classic pub/sub: the key's namespace (up
// to its first ':', which a namespace never contains) and ":wake", made
// once per namespace and client.
func (c *Client) classicWake(key string) *rdb.Prefix {
	ns, _, _ := strings.Cut(key, ":")
	c.wakesMu.RLock()
	w := c.wakes[ns]
	c.wakesMu.RUnlock()
	if w != nil {
		return w
	}
	w = rdb.NewPrefix(classicWakeName(ns))
	c.wakesMu.Lock()
	defer c.wakesMu.Unlock()
	if c.wakes == nil {
		c.wakes = map[string]*rdb.Prefix{}
	}
	if old := c.wakes[ns]; old != nil {
		return old
	}
	c.wakes[ns] = w
	return w
}

// classicWakeName returns namespace ns's classic wake-up prefix, <ns>:wake.
func classicWakeName(ns string) string { return ns + ":wake" }
