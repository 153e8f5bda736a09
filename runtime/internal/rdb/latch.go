package rdb

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Latch is a count-down latch's script operations
// (templates/latch_count_down.lua): a small value, made per call.
type Latch struct {
	Conn *Conn
	Def  *impl.LatchDef
	Key  string // the count
}

// Channel is the latch's wake-up channel: every waiter of every client
// waits on it.
func (l Latch) Channel() string { return keys.Sub(l.Key, "ch") }

// CountDown runs latch_count_down as operation op (unique across
// clients: the same in every send of the call):
//
//	KEYS: count
//	ARGV: spec_count, expire_ms, channel, publish, op
//
// The caller decodes its reply: the count left (see the script's header).
func (l Latch) CountDown(ctx context.Context, op string) *redis.Cmd {
	return l.Conn.Eval(ctx, l.Def.Scripts.CountDown, []string{l.Key}, l.Def.Count, l.Def.Expire.Milliseconds(), l.Channel(), l.Conn.publish(), op)
}
