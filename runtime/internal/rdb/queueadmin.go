package rdb

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
)

// PausedKey returns the key that is there while the queue is paused,
// <queue>:paused.
func (q Queue) PausedKey() string { return keys.Sub(q.Key, "paused") }

// Pause runs queue_pause: action "pause", "resume", or "" to read whether
// the queue is paused.
//
//	KEYS: the eleven, paused
//	ARGV: publish, action
func (q Queue) Pause(ctx context.Context, action string) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Pause, q.withRecord(q.PausedKey()), q.Conn.publish(), action)
}

// PopOrWait runs queue_pop for owner, a blocking Take's consumer: up to n
// ready items, or, when it takes nothing, owner registered in takers in
// the same call (as Wait registers it); registered says owner may be
// registered from an earlier call (it is taken out when it takes). With
// owner "" it only takes: up to n ready items, none while the queue is
// paused. In the consumers' lane of takes (see Lane), it is sent under sctx and returns by
// ctx's end (Conn.EvalWithinOr): late runs on the command of a call cut
// short in flight once its reply comes, to give back what it took.
//
//	KEYS: ready, paused, takers (with an owner)
//	ARGV: n, owner, registered
func (q Queue) PopOrWait(sctx, ctx context.Context, n int, owner string, registered bool, late func(*redis.Cmd)) *redis.Cmd {
	if owner == "" {
		return q.Conn.EvalWithinOr(sctx, ctx, &q.Conn.Takes, q.Def.Scripts.Pop, []string{q.Key, q.PausedKey()}, late, n)
	}
	r := ""
	if registered {
		r = "1"
	}
	return q.Conn.EvalWithinOr(sctx, ctx, &q.Conn.Takes, q.Def.Scripts.Pop, []string{q.Key, q.PausedKey(), q.Keys[10]}, late, n, owner, r)
}

// Item runs queue_item: action ("remove", "run-now", "bury", "redrive")
// on the item id, with reason (a bury's), recorded at record:
//
//	KEYS: the eleven, record
//	ARGV: publish, mode, action, id, reason, record_ms
func (q Queue) Item(ctx context.Context, record, action, id, reason string) *redis.Cmd {
	return q.Conn.Eval(ctx, q.Def.Scripts.Item, q.withRecord(record), q.Conn.publish(), q.mode(), action, id, reason, recordTTL)
}
