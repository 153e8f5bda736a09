package rdb

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// RedLock is a RedLock's script operations on one node
// (templates/redlock_*.lua): a small value, made per call. Each node is
// its own Redis with its own Conn; the lock's keys are the same on every
// node.
type RedLock struct {
	Conn    *Conn
	Scripts *impl.LockScripts
	Key     string
	Keys    []string // lock, queue, waiters
}

// Acquire runs redlock_acquire on the node: value for lease, registering
// member (a waiter's member in this node's registry, "" for none) for
// reg; registered is "0" for a first attempt, "1" for a woken waiter's, "2" for a waiter's refresh:
//
//	KEYS: lock, queue, waiters
//	ARGV: lease_ms, value, waiter, registry_ttl_ms, registered
//
// The caller decodes its reply (see the script's header).
func (r RedLock) Acquire(ctx context.Context, lease time.Duration, value, member string, reg time.Duration, registered string) *redis.Cmd {
	return r.Conn.Eval(ctx, r.Scripts.Acquire, r.Keys, lease.Milliseconds(), value, member, reg.Milliseconds(), registered)
}

// Release runs redlock_release on the node for value (a hold's value, or
// a waiter's member when leaving) in mode ('0' a release, '1' a waiter
// that leaves, '2' a failed attempt's undoing):
//
//	KEYS: lock, queue, waiters
//	ARGV: value, reserve_ms, prefix, publish, mode
func (r RedLock) Release(ctx context.Context, value any, mode string) *redis.Cmd {
	prefix, publish := r.Conn.wake(r.Key)
	return r.Conn.Eval(ctx, r.Scripts.Release, r.Keys, value, handoffArg, prefix, publish, mode)
}

// ForceUnlock runs force_unlock's RedLock form on the node: it deletes
// the lock whoever holds it and wakes its waiters on prefix (an argument
// that counts its sends).
//
//	KEYS: lock, queue, waiters
//	ARGV: prefix, publish
func (r RedLock) ForceUnlock(ctx context.Context, prefix any) *redis.Cmd {
	return r.Conn.Eval(ctx, r.Scripts.ForceUnlock, r.Keys, prefix, r.Conn.wakePublish())
}
