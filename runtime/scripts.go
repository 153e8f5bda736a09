package runtime

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// The constructors generated code calls go through package lockimpl (see
// runtime/internal/impl): they take the definitions lockgen emits, so
// they are not part of this package's API. Each kind's file sets its
// own; Preload is the client's.
func init() {
	impl.Preload = func(ctx context.Context, c any, scripts ...*impl.Script) error {
		return c.(*Client).preload(ctx, scripts...)
	}
}

// Preload loads scripts on every primary (every master of a cluster, every
// shard of a ring, the one server otherwise), so that no later call needs
// the NOSCRIPT fallback. A cluster client also settles its pub/sub mode
// (classic or sharded, see "Pub/sub: classic or sharded" in docs/design.md) here, so that no later call
// pays for that one-time probe. It returns the first Redis error, or an
// error matching ErrScriptMismatch when the generated code was made for
// other scripts than this runtime's, or Redis computes another SHA1 than
// the runtime.
func (c *Client) preload(ctx context.Context, scripts ...*impl.Script) error {
	if err := c.conn.Load(ctx, scripts...); err != nil {
		return err
	}
	if _, ok := c.rdb.(*redis.ClusterClient); ok {
		if _, err := c.hub.Sharded(ctx); err != nil {
			return fmt.Errorf("lockgen: probing the pub/sub mode: %w", err)
		}
	}
	return nil
}
