package rdb

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// AliveKey is the heartbeat key of the client with the given id: a string
// with a TTL that the client renews while it waits or holds, every such
// key in one slot (the hash tag {alive}), so that one MGET reads any set
// of them on a cluster too. No spec key can collide with it: an object's
// name cannot hold braces.
func AliveKey(id string) string { return "lockgen:{alive}:" + id }

// A heartbeat's value is its client's epoch (runtime's Client.epoch): "1"
// until the client finds a hold of its own gone that it did not give up
// (evicted, deleted by hand: its renewal or its release found nothing),
// one more at each such loss. Its watchers read it with the heartbeat: a
// value that changed says a hold they trust may have vanished with no
// release to tell them. A runtime of before epochs writes "1" always.

// BeatOn queues the client's heartbeat on pipe: SET AliveKey(id) epoch PX
// ttl.
func BeatOn(ctx context.Context, pipe redis.Pipeliner, id, epoch string, ttl time.Duration) {
	pipe.Set(ctx, AliveKey(id), epoch, ttl)
}

// Beat writes the heartbeat of the client id with its epoch, lasting ttl
// (none when id is ""), and reads those of the clients watched, in one
// round trip:
//
//	SET lockgen:{alive}:<id> epoch PX ttl GET
//	MGET lockgen:{alive}:<watched>...
//
// It returns, per watched client, its heartbeat's epoch ("" when it is
// not there), and whether the client's own heartbeat was there before
// this write (true when id is ""): a heartbeat written within its TTL
// that is gone says Redis lost its data (a restart without persistence, a
// flush, a failover to an empty replica).
func Beat(ctx context.Context, conn *Conn, id, epoch string, ttl time.Duration, watched []string) (seen []string, had bool, err error) {
	pipe := conn.R.Pipeline()
	var own *redis.StatusCmd
	if id != "" {
		own = pipe.SetArgs(ctx, AliveKey(id), epoch, redis.SetArgs{TTL: ttl, Get: true})
	}
	var get *redis.SliceCmd
	if len(watched) > 0 {
		keys := make([]string, len(watched))
		for i, w := range watched {
			keys[i] = AliveKey(w)
		}
		get = pipe.MGet(ctx, keys...)
	}
	if pipe.Len() == 0 {
		return nil, true, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, err
	}
	had = own == nil || own.Err() == nil
	seen = make([]string, len(watched))
	if get != nil {
		for i, v := range get.Val() {
			if v != nil {
				seen[i], _ = v.(string)
				if seen[i] == "" {
					seen[i] = "1" // (an empty value: there all the same)
				}
			}
		}
	}
	return seen, had, nil
}
