package rdb

import (
	"context"
	"fmt"
	"strings"
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
	// Watch is the hold kind a refresh that asks whom to watch passes
	// (registry_refresh): "K" for a lock whose value starts with its
	// owner, "F" for a fair lock's hash, "R" for a read-write lock, "P"
	// for a semaphore.
	Watch string
}

// Refreshed is what a registry_refresh found.
type Refreshed struct {
	Registered int64         // how many of the members were still registered
	PTTL       time.Duration // how long the (first) hold has left: -2ms none, -1ms no TTL
	Head       bool          // one of the members heads the queue
	Compact    bool          // the compact single hold answered
	// Watch, with Watchable, names the clients whose liveness vouches for
	// the wait (asked with watch): the holder's, then those of the
	// members queued ahead, other than the members' own.
	Watch     []string
	Watchable bool
}

// Refresh runs registry_refresh for members, one client's waiters of the
// registry's object, registered for ttl from now; with single (the last
// refresh found a compact single hold), the compact hold is read first;
// with watch, it also names the clients to watch (r.Watch's kind):
//
//	KEYS: hold, queue, waiters, single (with Deadlines)
//	ARGV: registry_ttl_ms, hold_kind, members...
//
// registry_refresh reply: {int, int, int, int, string}
func (r Registry) Refresh(ctx context.Context, conn *Conn, ttl time.Duration, members []string, single, watch bool) (Refreshed, error) {
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
	watch = watch && r.Watch != ""
	if watch {
		kind = r.Watch
	}
	args = append(args, ttl.Milliseconds(), kind)
	for _, m := range members {
		args = append(args, m)
	}
	v, err := conn.Eval(ctx, impl.RegistryRefresh(), keys, args...).Slice()
	if err != nil {
		return Refreshed{}, err
	}
	if len(v) != 5 {
		return Refreshed{}, fmt.Errorf("unexpected reply %v", v)
	}
	var n [4]int64
	for i := range n {
		x, ok := v[i].(int64)
		if !ok {
			return Refreshed{}, fmt.Errorf("unexpected reply %v", v)
		}
		n[i] = x
	}
	w, ok := v[4].(string)
	if !ok {
		return Refreshed{}, fmt.Errorf("unexpected reply %v", v)
	}
	f := Refreshed{Registered: n[0], PTTL: time.Duration(n[1]) * time.Millisecond, Head: n[2] == 1, Compact: n[3] == 1}
	if watch && w != "*" {
		f.Watch, f.Watchable = strings.Fields(w), true
	}
	return f, nil
}
