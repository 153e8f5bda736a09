package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// roundTrips is a go-redis hook that counts the commands a client sends
// and the round trips they take: a pipeline is one round trip. What
// go-redis sends to set up a new pool connection (HELLO, then CLIENT
// SETINFO in a pipeline) is not counted: a dial comes when the pool
// grows, not with the operation measured.
type roundTrips struct {
	trips, cmds atomic.Int64
	args        atomic.Int64 // the arguments of the commands, their names included
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if setup(cmd) {
			return next(ctx, cmd)
		}
		h.trips.Add(1)
		h.cmds.Add(1)
		h.args.Add(int64(len(cmd.Args())))
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return !setup(c) }) {
			return next(ctx, cmds)
		}
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		for _, c := range cmds {
			h.args.Add(int64(len(c.Args())))
		}
		return next(ctx, cmds)
	}
}

// setup reports whether cmd is one go-redis sends to set up a new
// connection: HELLO, or CLIENT SETINFO.
func setup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello":
		return true
	case "client":
		a := cmd.Args()
		return len(a) > 1 && strings.EqualFold(fmt.Sprint(a[1]), "setinfo")
	}
	return false
}
