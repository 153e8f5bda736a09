package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// evalCmd runs a script by SHA; when the server does not know it
// (NOSCRIPT, after a restart, a failover or SCRIPT FLUSH) it sends the
// source once with EVAL, which also caches it. The usual case costs one
// round trip, the recovery one more.
//
// A connection error on a cluster makes the client reload its slot map
// (see reloadOnConnError).
func (c *Client) eval(ctx context.Context, s *impl.Script, keys []string, args ...any) *redis.Cmd {
	if s.Err != nil {
		return failedCmd(ctx, s.Err)
	}
	cmd := c.rdb.EvalSha(ctx, s.SHA1, keys, args...)
	if isNoScript(cmd.Err()) {
		c.observe(ctx, Event{Kind: EventScriptReloaded, Object: s.Name})
		resetSends(args)
		cmd = c.rdb.Eval(ctx, s.Source, keys, args...)
	}
	c.reloadOnConnError(cmd.Err())
	return cmd
}

// evalBoxed is eval for a caller whose keys are boxed already (a Lock's
// lockPrep): it builds the command's arguments in one slice, where
// go-redis' EvalSha would box every key again and copy the arguments.
func (c *Client) evalBoxed(ctx context.Context, s *impl.Script, keys []any, args ...any) *redis.Cmd {
	if s.Err != nil {
		return failedCmd(ctx, s.Err)
	}
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	sha, ok := c.shas.Load(s)
	if !ok {
		sha = any(s.SHA1)
		c.shas.Store(s, sha)
	}
	cmdArgs = append(cmdArgs, "evalsha", sha, len(keys))
	cmdArgs = append(cmdArgs, keys...)
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(ctx, cmdArgs...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = c.rdb.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		c.observe(ctx, Event{Kind: EventScriptReloaded, Object: s.Name})
		resetSends(args)
		cmdArgs[0], cmdArgs[1] = "eval", s.Source
		cmd = redis.NewCmd(ctx, cmdArgs...)
		if len(keys) > 0 {
			cmd.SetFirstKeyPos(3)
		}
		_ = c.rdb.Process(ctx, cmd)
	}
	c.reloadOnConnError(cmd.Err())
	return cmd
}

// Boxed arguments that cost no allocation per call.
var (
	publishArg, spublishArg any = "publish", "spublish"
	handoffArg              any = HandoffLease.Milliseconds()
)

// publishArg returns publishCmd boxed.
func (c *Client) publishArg() any {
	if c.publishCmd() == "spublish" {
		return spublishArg
	}
	return publishArg
}

// reloadEvery is the least time between two slot-map reloads a client
// asks for.
const reloadEvery = 100 * time.Millisecond

// reloadOnConnError asks a cluster client to reload its slot map when err
// is a connection error (no reply from Redis: refused, reset, timed out),
// at most once per reloadEvery. go-redis keeps sending a slot's commands
// to the primary it knows, dead or not, until a MOVED reply or its
// periodic reload (every minute by default); after a failover nothing
// answers MOVED, so without this the slots of a dead primary would stay
// unreachable for up to a minute. With it they work again as soon as a
// replica is promoted: the reloads before the promotion find the old map,
// the first one after it the new one.
func (c *Client) reloadOnConnError(err error) {
	cc, ok := c.rdb.(*redis.ClusterClient)
	if !ok || !isConnError(err) {
		return
	}
	now := time.Now().UnixNano()
	last := c.reloaded.Load()
	if now-last < int64(reloadEvery) || !c.reloaded.CompareAndSwap(last, now) {
		return
	}
	cc.ReloadState(context.Background())
}

// isConnError reports whether err means Redis did not answer: not a reply
// of Redis (redis.Error, redis.Nil) and not the caller's cancellation.
func isConnError(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	return !errors.As(err, &rerr) && !errors.Is(err, context.Canceled)
}

// failedCmd returns a command that failed with err without being sent.
func failedCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
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
	for _, s := range scripts {
		if s.Err != nil {
			return s.Err
		}
	}
	load := func(ctx context.Context, rdb redis.Cmdable) error {
		for _, s := range scripts {
			sha, err := rdb.ScriptLoad(ctx, s.Source).Result()
			if err != nil {
				return fmt.Errorf("lockgen: loading script %s: %w", s.Name, err)
			}
			if sha != s.SHA1 {
				return fmt.Errorf("%w: %s is %s in this runtime, %s in Redis", ErrScriptMismatch, s.Name, s.SHA1, sha)
			}
		}
		return nil
	}
	switch rdb := c.rdb.(type) {
	case *redis.ClusterClient:
		if err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return load(ctx, m) }); err != nil {
			return err
		}
		if _, err := c.hub.Sharded(ctx); err != nil {
			return fmt.Errorf("lockgen: probing the pub/sub mode: %w", err)
		}
		return nil
	case *redis.Ring:
		return rdb.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return load(ctx, s) })
	default:
		return load(ctx, c.rdb)
	}
}
