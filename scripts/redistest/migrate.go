package redistest

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// SlotOwner returns the index in c.Nodes of the primary that serves slot,
// as CLUSTER SLOTS on the first node reports it.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (int, error) {
	rdb := redis.NewClient(&redis.Options{Addr: c.Addrs[0]})
	defer rdb.Close()
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return -1, fmt.Errorf("redistest: CLUSTER SLOTS on %s: %w", c.Addrs[0], err)
	}
	for _, s := range slots {
		if s.Start <= slot && slot <= s.End && len(s.Nodes) > 0 {
			for i, a := range c.Addrs {
				if a == s.Nodes[0].Addr {
					return i, nil
				}
			}
			return -1, fmt.Errorf("redistest: slot %d is served by %s, not a node of this cluster", slot, s.Nodes[0].Addr)
		}
	}
	return -1, fmt.Errorf("redistest: slot %d is not served", slot)
}

// MigrateSlot moves slot, with its keys, to the primary c.Nodes[to], the
// way redis-cli --cluster reshard does: CLUSTER SETSLOT IMPORTING on the
// target and MIGRATING on the source, MIGRATE of the slot's keys in
// batches, then CLUSTER SETSLOT NODE on the target, the source and the
// other nodes; it returns once every node reports the same slot map (see
// WaitReady). Clients see MOVED and ASK redirections meanwhile, as during
// a real resharding; the source drops its sharded pub/sub subscribers of
// the slot (they get an unsolicited sunsubscribe). Moving a slot to the
// node that serves it does nothing.
func (c *Cluster) MigrateSlot(ctx context.Context, slot, to int) error {
	if slot < 0 || slot >= numSlots || to < 0 || to >= len(c.Nodes) {
		return fmt.Errorf("redistest: MigrateSlot(%d, %d): no such slot or node", slot, to)
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	clients := make([]*redis.Client, len(c.Nodes))
	ids := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr})
		defer clients[i].Close()
		if ids[i], err = clients[i].ClusterMyID(ctx).Result(); err != nil {
			return fmt.Errorf("redistest: CLUSTER MYID on %s: %w", n.Addr, err)
		}
	}
	src, dst := clients[from], clients[to]
	step := func(rdb *redis.Client, args ...any) error {
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("redistest: %v on %s: %w", args, rdb.Options().Addr, err)
		}
		return nil
	}
	if err := step(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]); err != nil {
		return err
	}
	if err := step(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]); err != nil {
		return err
	}
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER GETKEYSINSLOT %d on %s: %w", slot, c.Addrs[from], err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", strconv.Itoa(c.Nodes[to].Port), "", 0, 5000, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := step(src, args...); err != nil {
			return err
		}
	}
	// The target first, so that the source's redirections lead somewhere
	// that accepts them.
	order := []int{to, from}
	for i := range c.Nodes {
		if i != to && i != from {
			order = append(order, i)
		}
	}
	for k, i := range order {
		// Replicas refuse SETSLOT; they learn the change from their primary.
		if err := step(clients[i], "CLUSTER", "SETSLOT", slot, "NODE", ids[to]); err != nil && k < 2 {
			return err
		}
	}
	return c.WaitReady(ctx)
}
