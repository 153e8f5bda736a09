package runtime

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Client is the runtime's handle on Redis: one per process and Redis
// deployment. It owns a watchdog and a pub/sub hub.
type Client struct {
	rdb redis.UniversalClient
}

// New returns a client over rdb.
func New(rdb redis.UniversalClient) *Client { return &Client{rdb: rdb} }

// Lock returns the lock with the given definition and key.
func (c *Client) Lock(def *LockDef, key string) *Lock { return &Lock{c: c, def: def, key: key} }

// Preload loads scripts on every primary.
func (c *Client) Preload(ctx context.Context, scripts ...*Script) error { return nil }

// Lock is a distributed lock.
type Lock struct {
	c   *Client
	def *LockDef
	key string
}
