// Package rdb is the runtime's Redis-operations layer: how a script is
// sent (EVALSHA, EVAL after NOSCRIPT, WAIT behind an acquire), and one Go
// function per script operation, holding its argument assembly and its
// reply decoding beside the script's contract (the KEYS, ARGV and reply
// its header in templates/ states). The runtime's types decide what to
// do; this package only says how each operation is put to Redis.
package rdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Conn runs scripts on one go-redis client.
type Conn struct {
	// R is the client the commands go to.
	R redis.UniversalClient
	// OnReload, when set, is told of a script sent again as EVAL after
	// NOSCRIPT (a restart, a failover or SCRIPT FLUSH).
	OnReload func(ctx context.Context, script string)
	// Sharded reports whether wake-ups are published with SPUBLISH
	// (sharded pub/sub) rather than PUBLISH.
	Sharded func() bool
	// WakePrefix returns the prefix of the wake-up channels of key's
	// waiters (the runtime's wakePrefix).
	WakePrefix func(key string) string

	// Takes is the lane (see Lane) of queue consumers' takes (and a
	// reliable queue's claims, which register too); Waits that of plain
	// queues' registrations, so that a woken consumer's take does not
	// queue behind the registrations of many Takes starting at once;
	// Moves the delay timer's; Offers the producers'; Settles that of
	// deliveries' acknowledgements, so that the acknowledgements of a
	// worker's handlers that finish together go in one pipeline.
	Takes, Waits, Moves, Offers, Settles Lane

	shas     sync.Map     // *impl.Script -> its SHA1, boxed once
	defaults sync.Map     // *impl.LockDef -> *defaults (see Lock), *impl.SemaphoreDef -> *semArgs (see Semaphore)
	reloaded atomic.Int64 // when the slot map was last reloaded (Unix ns), see ReloadOnConnError
}

// Eval runs a script by SHA; when the server does not know it it sends
// the source once with EVAL, which also caches it. The usual case costs
// one round trip, the recovery one more. A connection error on a cluster
// makes the client reload its slot map (see ReloadOnConnError).
func (c *Conn) Eval(ctx context.Context, s *impl.Script, keys []string, args ...any) *redis.Cmd {
	if s.Err != nil {
		return Failed(ctx, s.Err)
	}
	cmd := c.R.EvalSha(ctx, s.SHA1, keys, args...)
	if IsNoScript(cmd.Err()) {
		c.noScript(ctx, s, args)
		cmd = c.R.Eval(ctx, s.Source, keys, args...)
	}
	c.ReloadOnConnError(cmd.Err())
	return cmd
}

// EvalBoxed is Eval for a caller whose keys are boxed already (a
// prepared call's): it builds the command's arguments in one slice, where
// go-redis' EvalSha would box every key again and copy the arguments.
func (c *Conn) EvalBoxed(ctx context.Context, s *impl.Script, keys []any, args ...any) *redis.Cmd {
	if s.Err != nil {
		return Failed(ctx, s.Err)
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
	cmd := c.process(ctx, cmdArgs, len(keys) > 0)
	if IsNoScript(cmd.Err()) {
		c.noScript(ctx, s, args)
		cmdArgs[0], cmdArgs[1] = "eval", s.Source
		cmd = c.process(ctx, cmdArgs, len(keys) > 0)
	}
	c.ReloadOnConnError(cmd.Err())
	return cmd
}

// EvalArgs is Eval for a caller that builds the whole command in one
// slice: cmdArgs[0] and [1] are left for the command and the SHA1 (it
// fills them), [2] is the number of keys, nkeys, and the keys and
// arguments follow. It saves the copies and the boxing of EvalSha.
func (c *Conn) EvalArgs(ctx context.Context, s *impl.Script, cmdArgs []any, nkeys int) *redis.Cmd {
	if s.Err != nil {
		return Failed(ctx, s.Err)
	}
	sha, ok := c.shas.Load(s)
	if !ok {
		sha = any(s.SHA1)
		c.shas.Store(s, sha)
	}
	cmdArgs[0], cmdArgs[1] = "evalsha", sha
	cmd := c.process(ctx, cmdArgs, nkeys > 0)
	if IsNoScript(cmd.Err()) {
		c.noScript(ctx, s, cmdArgs[3+nkeys:])
		cmdArgs[0], cmdArgs[1] = "eval", s.Source
		cmd = c.process(ctx, cmdArgs, nkeys > 0)
	}
	c.ReloadOnConnError(cmd.Err())
	return cmd
}

func (c *Conn) process(ctx context.Context, args []any, keyed bool) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	if keyed {
		cmd.SetFirstKeyPos(3)
	}
	_ = c.R.Process(ctx, cmd)
	return cmd
}

// noScript is told of s answered NOSCRIPT: nothing ran, so the counted
// arguments forget their sends.
func (c *Conn) noScript(ctx context.Context, s *impl.Script, args []any) {
	if c.OnReload != nil {
		c.OnReload(ctx, s.Name)
	}
	ResetSends(args)
}

// EvalWait runs s like Eval and sends WAIT replicas timeout right after it
// in the same pipeline, on the connection of the primary of keys[0]: one
// round trip. (A script cannot call WAIT, and WAIT must follow the write
// on the same connection.) The WAIT reply says how many replicas
// acknowledged the connection's writes so far; it is nil when the
// pipeline could not be sent.
func (c *Conn) EvalWait(ctx context.Context, s *impl.Script, sync impl.SyncDef, keys []string, args ...any) (*redis.Cmd, *redis.Cmd) {
	if s.Err != nil {
		return Failed(ctx, s.Err), nil
	}
	rdb, err := c.PrimaryOf(ctx, keys[0])
	if err != nil {
		c.ReloadOnConnError(err)
		return Failed(ctx, err), nil
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
	if IsNoScript(cmd.Err()) {
		c.noScript(ctx, s, args)
		cmd, wait = run(true)
	}
	c.ReloadOnConnError(cmd.Err())
	return cmd, wait
}

// wake returns the wake-up prefix of key's waiters and the publish
// command of the scripts that keep a waiter registry, boxed (wakePublish).
func (c *Conn) wake(key string) (prefix, publish any) {
	return c.WakePrefix(key), c.wakePublish()
}

// wakePublish returns the publish command of the scripts that keep a
// waiter registry, boxed: SPUBLISH, or PUBLISH whose count of receivers
// tells whether a waiter's client still listens (a single primary, where
// every subscriber of the channel is on the server that runs the
// script), or "publish!" when that count says nothing (classic pub/sub
// on a cluster or a Ring, whose subscribers may be on another node): the
// registry's notify then takes every waiter as listening (see notify in
// templates/registry.luainc).
func (c *Conn) wakePublish() any {
	switch {
	case c.Sharded():
		return spublishArg
	case c.CountsReceivers():
		return publishArg
	}
	return blindPublishArg
}

// CountsReceivers reports whether the wake-ups' publish counts every
// subscriber of a channel: with sharded pub/sub, or on a single primary
// (a standalone server, or Sentinel's). Its waiters may then keep their
// registration long (see the runtime's LiveRegistryTTL).
func (c *Conn) CountsReceivers() bool {
	if c.Sharded() {
		return true
	}
	_, single := c.R.(*redis.Client)
	return single
}

// publish returns the publish command, boxed.
func (c *Conn) publish() any {
	if c.Sharded() {
		return spublishArg
	}
	return publishArg
}

// PrimaryOf returns the client of the primary serving key: on a cluster
// the master of its slot, otherwise the one client.
func (c *Conn) PrimaryOf(ctx context.Context, key string) (redis.Cmdable, error) {
	if cc, ok := c.R.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return c.R, nil
}

// Load loads scripts on every primary (every master of a cluster, every
// shard of a ring, the one server otherwise). It returns the first Redis
// error, or an error matching impl.ErrScriptMismatch when Redis computes
// another SHA1 than the runtime.
func (c *Conn) Load(ctx context.Context, scripts ...*impl.Script) error {
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
				return fmt.Errorf("%w: %s is %s in this runtime, %s in Redis", impl.ErrScriptMismatch, s.Name, s.SHA1, sha)
			}
		}
		return nil
	}
	switch rdb := c.R.(type) {
	case *redis.ClusterClient:
		return rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return load(ctx, m) })
	case *redis.Ring:
		return rdb.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return load(ctx, s) })
	default:
		return load(ctx, c.R)
	}
}

// reloadEvery is the least time between two slot-map reloads a client
// asks for.
const reloadEvery = 100 * time.Millisecond

// ReloadOnConnError asks a cluster client to reload its slot map when err
// is a connection error (no reply from Redis: refused, reset, timed out),
// at most once per reloadEvery. go-redis keeps sending a slot's commands
// to the primary it knows, dead or not, until a MOVED reply or its
// periodic reload (every minute by default); after a failover nothing
// answers MOVED, so without this the slots of a dead primary would stay
// unreachable for up to a minute. With it they work again as soon as a
// replica is promoted: the reloads before the promotion find the old map,
// the first one after it the new one.
func (c *Conn) ReloadOnConnError(err error) {
	cc, ok := c.R.(*redis.ClusterClient)
	if !ok || !IsConnError(err) {
		return
	}
	now := time.Now().UnixNano()
	last := c.reloaded.Load()
	if now-last < int64(reloadEvery) || !c.reloaded.CompareAndSwap(last, now) {
		return
	}
	cc.ReloadState(context.Background())
}

// IsConnError reports whether err means Redis did not answer: not a reply
// of Redis (redis.Error, redis.Nil) and not the caller's cancellation.
func IsConnError(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	return !errors.As(err, &rerr) && !errors.Is(err, context.Canceled)
}

// IsNoScript reports whether err is Redis' NOSCRIPT reply.
func IsNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// Failed returns a command that failed with err without being sent.
func Failed(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
