package rdb

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Schedule is a schedule's script operations
// (templates/schedule_fire.lua): a small value, made per call.
type Schedule struct {
	Conn *Conn
	Def  *impl.ScheduleDef
	Key  string // the state hash
	// Queue holds the target queue's ready list, data hash and takers
	// (nil for a handler schedule); Mode is its mode, "r" or "p".
	Queue []string
	Mode  string
}

// Read runs schedule_fire without a tick: it changes nothing and answers
// the state and the server's clock:
//
//	KEYS: state
//	ARGV: tick_ms ('')
func (s Schedule) Read(ctx context.Context) *redis.Cmd {
	return s.Conn.Eval(ctx, s.Def.Scripts.Fire, []string{s.Key}, "")
}

// Fire runs schedule_fire, claiming tick (unix ms; next is the tick after
// it) as operation op of client by; deadline is the missed deadline (unix
// ms), or "" for none. A queue schedule offers item with the claim:
//
//	KEYS: state[, ready, data, takers]
//	ARGV: tick_ms, by, op, next_ms, deadline_ms[, publish, mode, item]
//
// The caller decodes its reply (see the script's header).
func (s Schedule) Fire(ctx context.Context, tick, next int64, by, op string, deadline any, item []byte) *redis.Cmd {
	if s.Queue == nil {
		return s.Conn.Eval(ctx, s.Def.Scripts.Fire, []string{s.Key}, tick, by, op, next, deadline)
	}
	ks := append([]string{s.Key}, s.Queue...)
	return s.Conn.Eval(ctx, s.Def.Scripts.Fire, ks, tick, by, op, next, deadline, s.Conn.publish(), s.Mode, item)
}
