package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// ErrNotReplicated: a lock with replica sync (spec sync:) was taken, but
// fewer replicas than it asks for acknowledged it within its timeout while
// that many were connected (or the WAIT failed): a failover could lose
// the lock. Lock returns it (wrapped, with the counts) and holds nothing:
// the lock was released.
var ErrNotReplicated = errors.New("lockgen: lock not replicated")

// checkSynced checks the WAIT that followed the acquire of le (see
// checkSync); when too few replicas have it, it unlocks le and returns an
// error matching ErrNotReplicated.
func (l *Lock) checkSynced(ctx context.Context, le *Lease, wait *redis.Cmd) error {
	if l.def.Sync.Replicas == 0 {
		return nil
	}
	if err := l.c.checkSync(ctx, l.def.Sync, l.key, wait); err != nil {
		_ = le.Unlock(ctx)
		return err
	}
	return nil
}

// checkSync checks the WAIT that followed an acquire of key: nil when
// enough replicas acknowledged it, when none is connected (nothing to
// sync to), or when fewer are connected than sync asks for and all of
// them acknowledged; otherwise an error matching ErrNotReplicated.
func (c *Client) checkSync(ctx context.Context, sync impl.SyncDef, key string, wait *redis.Cmd) error {
	var acked int64
	var werr error
	if wait == nil {
		werr = errors.New("WAIT not sent")
	} else {
		acked, werr = wait.Int64()
	}
	if werr == nil && acked >= int64(sync.Replicas) {
		return nil
	}
	// Too few: how many replicas are connected? (A second round trip,
	// only on this path.)
	primary, err := c.conn.PrimaryOf(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotReplicated, key, err)
	}
	info, err := primary.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotReplicated, key, err)
	}
	connected := int64(-1)
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			connected, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	switch {
	case connected == 0:
		return nil
	case werr != nil:
		return fmt.Errorf("%w: %s: WAIT: %w", ErrNotReplicated, key, werr)
	case connected > 0 && acked >= min(int64(sync.Replicas), connected):
		return nil
	}
	return fmt.Errorf("%w: %s: %d of %d replicas acknowledged within %v, %d connected", ErrNotReplicated, key, acked, sync.Replicas, sync.Timeout, connected)
}
