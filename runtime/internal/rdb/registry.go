package rdb

import (
	"context"
	"fmt"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Registry names one object's waiter registry: the key that tells how
// long its hold lasts, and the registry's two keys, in one slot.
type Registry struct {
	Hold, Queue, Waiters string
	// Deadlines: Hold is a sorted set of the holds' deadlines (a
	// read-write lock's holds, a semaphore's), not a key whose TTL is
	// the hold's.
	Deadlines bool
	// Single, with Deadlines: the key that holds a compact single hold
	// instead, while Hold is empty (its "s" field; its TTL is the
	// hold's): a read-write lock's hash, a semaphore's counts.
	Single string
}

// Refresh runs registry_refresh for members, one client's waiters of the
// registry's object, registered for ttl from now; with single (the last
// refresh found a compact single hold), the compact hold is read first:
//
//	KEYS: hold, queue, waiters, single (with Deadlines)
//	ARGV: registry_ttl_ms, hold_kind, members...
//
// It returns whether the compact single hold answered (compact).
//
// registry_refresh reply: {int, int, int} | {int, int, int, int}
func (r Registry) Refresh(ctx context.Context, conn *Conn, ttl time.Duration, members []string, single bool) (registered int64, pttl time.Duration, head, compact bool, err error) {
	args := make([]any, 0, 2+len(members))
	kind := "k"
	keys := []string{r.Hold, r.Queue, r.Waiters}
	if r.Deadlines {
		kind = "z"
		if r.Single != "" {
			keys = append(keys, r.Single)
			if single {
				kind = "s"
			}
		}
	}
	args = append(args, ttl.Milliseconds(), kind)
	for _, m := range members {
		args = append(args, m)
	}
	v, err := conn.Eval(ctx, impl.RegistryRefresh(), keys, args...).Int64Slice()
	if err != nil {
		return 0, 0, false, false, err
	}
	if len(v) != 3 && len(v) != 4 {
		return 0, 0, false, false, fmt.Errorf("unexpected reply %v", v)
	}
	return v[0], time.Duration(v[1]) * time.Millisecond, v[2] == 1, len(v) == 4 && v[3] == 1, nil
}
