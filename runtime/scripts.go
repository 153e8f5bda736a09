package runtime

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// evalCmd runs a script by SHA; when the server does not know it
// (NOSCRIPT, after a restart, a failover or SCRIPT FLUSH) it sends the
// source once with EVAL, which also caches it. The usual case costs one
// round trip, the recovery one more.
func (c *Client) eval(ctx context.Context, s *Script, keys []string, args ...any) *redis.Cmd {
	cmd := c.rdb.EvalSha(ctx, s.SHA1, keys, args...)
	if isNoScript(cmd.Err()) {
		cmd = c.rdb.Eval(ctx, s.Source, keys, args...)
	}
	return cmd
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// Preload loads scripts on every primary (every master of a cluster, every
// shard of a ring, the one server otherwise), so that no later call needs
// the NOSCRIPT fallback. It returns the first Redis error, or an error
// matching ErrScriptMismatch when Redis computes another SHA1 than the
// generated one.
func (c *Client) Preload(ctx context.Context, scripts ...*Script) error {
	load := func(ctx context.Context, rdb redis.Cmdable) error {
		for _, s := range scripts {
			sha, err := rdb.ScriptLoad(ctx, s.Source).Result()
			if err != nil {
				return fmt.Errorf("lockgen: loading script %s: %w", s.Name, err)
			}
			if sha != s.SHA1 {
				return fmt.Errorf("%w: %s is %s in the generated code, %s in Redis", ErrScriptMismatch, s.Name, s.SHA1, sha)
			}
		}
		return nil
	}
	switch rdb := c.rdb.(type) {
	case *redis.ClusterClient:
		return rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return load(ctx, m) })
	case *redis.Ring:
		return rdb.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return load(ctx, s) })
	default:
		return load(ctx, c.rdb)
	}
}
