package rdb

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// MultiLock is a multi-lock's script operations (templates/multi_*.lua):
// its locks, all on one slot and of the kinds that have the multi scripts
// (reentrant, simple), with the lease of each one's hold.
type MultiLock struct {
	Locks  []*Lock
	Leases []time.Duration
}

// Keys returns the KEYS of the multi scripts: each lock's, in order.
func (m MultiLock) Keys() []string {
	ks := make([]string, 0, 3*len(m.Locks))
	for _, l := range m.Locks {
		ks = append(ks, l.keys...)
	}
	return ks
}

// Acquire runs multi_acquire once for owner, registering it for reg at
// the first lock held by another (0: not); flag is the script's
// registered argument ('0', '2:<i>', either after 'n' for a new owner):
//
//	KEYS: three per lock (Keys)
//	ARGV: owner, registry_ttl_ms, registered, then per lock: kind, lease_ms
//
// The caller decodes its reply (see the script's header).
func (m MultiLock) Acquire(ctx context.Context, owner string, reg time.Duration, flag string) *redis.Cmd {
	args := make([]any, 0, 3+2*len(m.Locks))
	args = append(args, owner, reg.Milliseconds(), flag)
	for i, l := range m.Locks {
		args = append(args, l.kind.String(), m.Leases[i].Milliseconds())
	}
	return m.Locks[0].conn.Eval(ctx, m.Locks[0].scripts.MultiAcquire, m.Keys(), args...)
}

// Release runs multi_release for owner's holds of the locks:
//
//	KEYS: three per lock (Keys)
//	ARGV: owner, publish, then per lock: kind, lease_ms, wake prefix,
//	      handoff_ms
//
// The caller decodes its reply, a code per lock (see the script's
// header).
func (m MultiLock) Release(ctx context.Context, owner string) *redis.Cmd {
	c := m.Locks[0].conn
	args := make([]any, 0, 2+4*len(m.Locks))
	args = append(args, owner, c.wakePublish())
	for i, l := range m.Locks {
		args = append(args, l.kind.String(), m.Leases[i].Milliseconds(), l.Channel(), handoffArg)
	}
	return c.Eval(ctx, m.Locks[0].scripts.MultiRelease, m.Keys(), args...)
}
