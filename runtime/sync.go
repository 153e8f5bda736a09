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

// evalAcquire runs the lock's acquire script with keys and args; for a
// lock with replica sync, WAIT follows in the same round trip (evalWait),
// and its reply is returned for checkSynced.
func (l *Lock) evalAcquire(ctx context.Context, keys []string, args ...any) (cmd, wait *redis.Cmd) {
	if sync := l.def.Sync; sync.Replicas > 0 {
		return l.c.evalWait(ctx, l.def.Scripts.Acquire, sync, keys, args...)
	}
	return l.c.eval(ctx, l.def.Scripts.Acquire, keys, args...), nil
}

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

// evalWait runs s like eval and sends WAIT replicas timeout right after it
// in the same pipeline, on the connection of the primary of keys[0]: one
// round trip. (A script cannot call WAIT, and WAIT must follow the write
// on the same connection.) The WAIT reply says how many replicas
// acknowledged the connection's writes so far; it is nil when the
// pipeline could not be sent.
func (c *Client) evalWait(ctx context.Context, s *impl.Script, sync impl.SyncDef, keys []string, args ...any) (*redis.Cmd, *redis.Cmd) {
	if s.Err != nil {
		return failedCmd(ctx, s.Err), nil
	}
	rdb, err := c.primaryOf(ctx, keys[0])
	if err != nil {
		c.reloadOnConnError(err)
		return failedCmd(ctx, err), nil
	}
	run := func(source bool) (*redis.Cmd, *redis.Cmd) {
		pipe := rdb.Pipeline()
		var cmd *redis.Cmd
		if source {
			cmd = pipe.Eval(ctx, s.Source, keys, args...)
		} else {
			cmd = pipe.EvalSha(ctx, s.SHA1, keys, args...)
		}
		wait := pipe.Do(ctx, "wait", sync.Replicas, sync.Timeout.Milliseconds())
		_, _ = pipe.Exec(ctx) // errors are per command
		return cmd, wait
	}
	cmd, wait := run(false)
	if isNoScript(cmd.Err()) {
		cmd, wait = run(true)
	}
	c.reloadOnConnError(cmd.Err())
	return cmd, wait
}

// primaryOf returns the client of the primary serving key: on a cluster
// its node's, otherwise the client's own.
func (c *Client) primaryOf(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return c.rdb, nil
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
	rdb, err := c.primaryOf(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotReplicated, key, err)
	}
	info, err := rdb.Info(ctx, "replication").Result()
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
