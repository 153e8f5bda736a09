package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/delay"
	"github.com/lockgen/lockgen/runtime/internal/hub"
	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// Client is the runtime's handle on one Redis deployment: a single node,
// Sentinel or Cluster, through redis.UniversalClient. Create one per process
// and deployment and share it: it owns one watchdog goroutine that renews
// every lock it holds and one pub/sub connection on which all its waiters
// wait. It is safe for concurrent use.
type Client struct {
	rdb redis.UniversalClient
	id  string
	seq atomic.Uint64
	ops atomic.Uint64 // operation ids (see newOp)
	// tag is a short stand-in for id in the operation ids a limiter's
	// state records (see newTaggedOp), made once from id.
	tag string

	wd    *watchdog.Watchdog
	hub   *hub.Hub
	sched delay.Scheduler // the delay timer of the queues it serves (runtime/internal/delay)

	conn rdb.Conn // the scripts' calls (runtime/internal/rdb)

	// The classic wake-up prefix of each namespace (see wakePrefix).
	wakesMu sync.RWMutex
	wakes   map[string]*rdb.Prefix

	regs refresher // its waiters' registrations (refresh.go)
	// beat is when it last wrote its heartbeat, in Unix nanoseconds, and
	// holdBeatTTL how long its holder's heartbeat lasts; losses counts the
	// holds it found gone without giving them up, which its heartbeat's
	// epoch carries, and telling whether a write of them is under way
	// (alive.go).
	beat, holdBeatTTL atomic.Int64
	losses            atomic.Uint64
	telling           atomic.Bool
	takers            takerRefresher // its waiting Takes' registrations (queuerefresh.go)
	latchReads        latchReads     // its awaiting goroutines' reads of a latch (latchread.go)
	clocks            serverClocks   // its primaries' clocks (clock.go)

	fences fences // the last fencing token seen per fenced lock (fenced.go)
	// contended: the objects found held by another owner lately
	// (contended.go)
	contended contention

	timers schedTimers // the timer of its started schedules (schedule.go)

	closeOnce     sync.Once
	shardedPubSub bool // sharded pub/sub may be chosen (runtime/internal/hub)

	maxItem int64 // the largest encoded queue item an offer sends (WithMaxItemSize)

	observers   []Observer       // see WithObserver (observer.go)
	propagators []ItemPropagator // the observers that carry context in queue items

	stats *statsRecorder // WithStats' counts (stats.go); nil without
}

// Option configures a Client.
type Option func(*Client)

// WithID sets the client's id, the prefix of every owner id it creates.
// It must be unique among the clients of one Redis deployment; the default
// is 16 random bytes in hex.
func WithID(id string) Option { return func(c *Client) { c.id = id } }

// WithClassicPubSub makes the client wait with classic pub/sub (SUBSCRIBE,
// PUBLISH) even on a Redis 7 cluster, where it would use sharded pub/sub
// (see "Pub/sub: classic or sharded" in docs/design.md): for a cluster
// behind a proxy or ACLs that do not allow SSUBSCRIBE. Every wake-up then
// crosses the cluster bus to every node.
func WithClassicPubSub() Option { return func(c *Client) { c.shardedPubSub = false } }

// DefaultMaxItemSize is the largest encoded queue item a Client sends
// unless WithMaxItemSize says otherwise: Redis' default
// proto-max-bulk-len, 512 MB, above which Redis refuses the command.
const DefaultMaxItemSize = 512 << 20

// WithMaxItemSize sets the largest encoded queue item (the codec's bytes
// in their envelope, with any trace context) an offer sends: Offer,
// OfferMany, OfferIn, OfferAt and Enqueue of a larger one return
// ErrItemTooLarge and send nothing. Set it to your server's
// proto-max-bulk-len when that is lower than the default
// (DefaultMaxItemSize), or lower still to keep large items out of Redis.
// n <= 0 keeps the default.
func WithMaxItemSize(n int64) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxItem = n
		}
	}
}

// New returns a client over rdb. It does not contact Redis. Close it to
// stop its watchdog and pub/sub connection; rdb stays open. Options:
// WithID, WithClassicPubSub, WithMaxItemSize, WithObserver, WithLogger,
// WithStats.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	c := &Client{rdb: rdb, shardedPubSub: shardedPubSub, maxItem: DefaultMaxItemSize}
	for _, o := range opts {
		o(c)
	}
	if c.id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		c.id = hex.EncodeToString(b[:])
	}
	c.tag = opTag(c.id)
	c.conn.R = rdb
	c.conn.Sharded = func() bool { return c.publishCmd() == "spublish" }
	c.conn.WakePrefix = c.wakePrefix
	if len(c.observers) > 0 {
		c.conn.OnReload = func(ctx context.Context, script string) {
			c.observe(ctx, Event{Kind: EventScriptReloaded, Object: script})
		}
	}
	c.wd = newWatchdog(c)
	c.hub = hub.New(rdb, c.shardedPubSub)
	c.sched.Hub = c.hub
	c.sched.OnRetry = c.observeTimerRetry
	if len(c.observers) > 0 {
		c.hub.OnLost = c.observePubSubLost
	}
	if c.stats != nil {
		go c.stats.run(rdb)
	}
	return c
}

// ID returns the client's id.
func (c *Client) ID() string { return c.id }

// Redis returns the client's Redis connection.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Close stops renewing: the contexts of the leases still held are
// cancelled with ErrClosed and their locks expire after their lease unless
// unlocked. Waiters return ErrClosed. Close does not close the Redis
// connection it was given. With WithStats it also sends the counts not
// yet sent, within a second. It always returns nil; closing twice is a
// no-op.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.wd.Close()
		c.hub.Close()
		if c.stats != nil {
			c.stats.close(c.rdb) // sends what is left, within a second
		}
	})
	return nil
}

// newOwner returns a fresh owner id: the client id and a sequence number.
func (c *Client) newOwner() string {
	var buf [64]byte
	b := append(append(buf[:0], c.id...), ':')
	return string(strconv.AppendUint(b, c.seq.Add(1), 10)) // one allocation
}

type ownerKey struct{}

// ownerFrom returns the owner id carried by ctx (set by a lease's
// Context), or a fresh one.
func (c *Client) ownerFrom(ctx context.Context) string {
	if o, ok := ctx.Value(ownerKey{}).(string); ok {
		return o
	}
	return c.newOwner()
}

// Lock returns the lock with the given definition (emitted by lockgen) and
// key. It does not contact Redis.
func (c *Client) newLock(def *impl.LockDef, key string) *Lock { return c.lock(def, key, "") }

// lock returns the lock (mode "r" or "w": the side of a read-write lock)
// with its script calls prepared, in one allocation.
func (c *Client) lock(def *impl.LockDef, key, mode string) *Lock {
	l := &Lock{c: c, def: def, key: key, mode: mode}
	l.ops.Prepare(&c.conn, def, key, mode, l.registryTTL(), c.classicWake(key))
	return l
}
