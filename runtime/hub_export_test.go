package runtime

import (
	"strings"

	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// PublishCmd returns the command c's scripts publish wake-ups with:
// "publish" or "spublish".
func PublishCmd(c *Client) string { return c.publishCmd() }

// WakeChannel returns the channel c's waiters on key wait on: key:ch:<id>
// with sharded pub/sub, <namespace>:wake:<id> with classic.
func WakeChannel(c *Client, key string) string { return c.wakePrefix(key) + ":" + c.id }

// ClassicWakePrefix is the prefix of the wake-up channels of key's waiters
// with classic pub/sub.
func ClassicWakePrefix(key string) string {
	ns, _, _ := strings.Cut(key, ":")
	return classicWakeName(ns)
}

// WithShardedPubSub lets (or forbids) a client on a Redis 7 cluster choose
// sharded pub/sub, whatever the default.
func WithShardedPubSub(on bool) Option { return func(c *Client) { c.shardedPubSub = on } }

// Joined returns how many waits of c have joined its subscription of
// channel (0 when c does not subscribe it): waits past subscribing, which
// a message on channel reaches.
func Joined(c *Client, channel string) int { return c.hub.Joined(channel) }

// SawContended makes c take key for contended (see contention), as an
// attempt that had to wait there would.
func SawContended(c *Client, key string) { c.contended.saw(key) }

// HubHealthEvery is how long a subscribed pub/sub connection may be
// silent before the hub pings it.
const HubHealthEvery = hub.HealthEvery

// HubLinger is how long a wake-up channel stays subscribed after its last
// waiter left.
const HubLinger = hub.Linger

// AcksQueued returns how many acknowledgements of c's deliveries wait in
// its acknowledgements' lane for a flight.
func AcksQueued(c *Client) int { return c.conn.Settles.Queued() }
