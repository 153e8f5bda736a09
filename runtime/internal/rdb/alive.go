package rdb

import (
	"context"
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
//	SET lockgen:{alive}:<id> 1 PX ttl
//	MGET lockgen:{alive}:<watched>...
//
// It returns, per watched client, whether its heartbeat is there.
func Beat(ctx context.Context, conn *Conn, id string, ttl time.Duration, watched []string) ([]bool, error) {
	pipe := conn.R.Pipeline()
	if id != "" {
		BeatOn(ctx, pipe, id, ttl)
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
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	alive := make([]bool, len(watched))
	if get != nil {
		for i, v := range get.Val() {
			alive[i] = v != nil
		}
	}
	return alive, nil
}
