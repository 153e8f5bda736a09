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

// BeatOn queues the client's heartbeat on pipe: SET AliveKey(id) 1 PX ttl.
func BeatOn(ctx context.Context, pipe redis.Pipeliner, id string, ttl time.Duration) {
	pipe.Set(ctx, AliveKey(id), "1", ttl)
}

// Beat writes the heartbeat of the client id, lasting ttl (none when id
// is ""), and reads those of the clients watched, in one round trip:
//
//	SET lockgen:{alive}:<id> 1 PX ttl GET
//	MGET lockgen:{alive}:<watched>...
//
// It returns, per watched client, whether its heartbeat is there, and
// whether the client's own was there before this write (true when id is
// ""): a heartbeat written within its TTL that is gone says Redis lost
// its data (a restart without persistence, a flush, a failover to an
// empty replica).
func Beat(ctx context.Context, conn *Conn, id string, ttl time.Duration, watched []string) (alive []bool, had bool, err error) {
	pipe := conn.R.Pipeline()
	var own *redis.StatusCmd
	if id != "" {
		own = pipe.SetArgs(ctx, AliveKey(id), "1", redis.SetArgs{TTL: ttl, Get: true})
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
	alive = make([]bool, len(watched))
	if get != nil {
		for i, v := range get.Val() {
			alive[i] = v != nil
		}
	}
	return alive, had, nil
}
