package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const numSlots = 16384

// clusterTimeout bounds StartCluster's wait for the cluster to agree.
var clusterTimeout = 10 * time.Second

// Cluster is a Redis Cluster of primaries only, one Node each, with the
// 16384 slots split evenly between them in order: Nodes[0] serves the lowest.
type Cluster struct {
	Nodes []*Node
	Addrs []string // the nodes' Addr, for redis.ClusterOptions.Addrs

	mu      sync.Mutex
	clients []*redis.ClusterClient
	stopped bool
}

// StartCluster starts a cluster of the given number of primaries and returns
// once it is ready, as defined by WaitReady: about 2.1s, because Redis holds
// a new primary in cluster_state:fail for 2s. Options apply to every node.
// It returns ErrNotFound when redis-server is not in PATH; on any error, the
// nodes already started are closed.
func StartCluster(primaries int, opts ...Option) (*Cluster, error) {
	if primaries < 1 || primaries > numSlots {
		return nil, fmt.Errorf("redistest: a cluster needs 1..%d primaries, got %d", numSlots, primaries)
	}
	cfg := newConfig(opts)
	cfg.cluster = true
	nodes, err := startMany(primaries, cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Nodes: nodes}
	for _, n := range nodes {
		c.Addrs = append(c.Addrs, n.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.form(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// form assigns slots and joins the nodes. As redis-cli --cluster create
// does, it gives each node a distinct config epoch first, so that no epoch
// collision has to be resolved later.
func (c *Cluster) form(ctx context.Context) error {
	clients := make([]*redis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr})
		defer clients[i].Close()
	}
	for i, rdb := range clients {
		lo, hi := i*numSlots/len(clients), (i+1)*numSlots/len(clients)-1
		if err := rdb.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("redistest: CLUSTER SET-CONFIG-EPOCH on %s: %w", c.Addrs[i], err)
		}
		if err := rdb.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, c.Addrs[i], err)
		}
	}
	// Every node meets every other: waiting for gossip to introduce them
	// would take seconds.
	for i, rdb := range clients {
		for _, n := range c.Nodes[i+1:] {
			if err := rdb.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(n.Port)).Err(); err != nil {
				return fmt.Errorf("redistest: CLUSTER MEET %s on %s: %w", n.Addr, c.Addrs[i], err)
			}
		}
	}
	return nil
}

// WaitReady polls every node, every 20ms, until each reports
// cluster_state:ok and knows every node, and all of them return the same
// slot-to-node map for all 16384 slots in CLUSTER SLOTS. It returns the
// last disagreement when ctx ends. Use it after restarting a node, which
// also takes 2s to report cluster_state:ok again.
func (c *Cluster) WaitReady(ctx context.Context) error {
	clients := make([]*redis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		defer clients[i].Close()
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := c.check(ctx, clients)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster %v not ready: %w (%w)", c.Addrs, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// check returns nil if the cluster is ready, or the first problem found.
func (c *Cluster) check(ctx context.Context, clients []*redis.Client) error {
	var want string
	for i, rdb := range clients {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", c.Addrs[i], err)
		}
		for _, field := range []string{
			"cluster_state:ok",
			"cluster_slots_assigned:" + strconv.Itoa(numSlots),
			"cluster_known_nodes:" + strconv.Itoa(len(c.Nodes)),
		} {
			if !strings.Contains(info, field+"\r\n") {
				return fmt.Errorf("%s: CLUSTER INFO lacks %s", c.Addrs[i], field)
			}
		}
		slots, err := rdb.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER SLOTS on %s: %w", c.Addrs[i], err)
		}
		got, err := slotMap(slots)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Addrs[i], err)
		}
		if i == 0 {
			want = got
		} else if got != want {
			return fmt.Errorf("%s and %s disagree on CLUSTER SLOTS: %s vs %s", c.Addrs[0], c.Addrs[i], want, got)
		}
	}
	return nil
}

// slotMap renders CLUSTER SLOTS as "start-end:port ..." in slot order, and
// checks that the ranges cover every slot exactly once.
func slotMap(slots []redis.ClusterSlot) (string, error) {
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	var b strings.Builder
	next := 0
	for _, s := range slots {
		if s.Start != next || len(s.Nodes) == 0 {
			return "", fmt.Errorf("CLUSTER SLOTS does not cover slot %d", next)
		}
		port := s.Nodes[0].Addr[strings.LastIndexByte(s.Nodes[0].Addr, ':')+1:]
		fmt.Fprintf(&b, "%d-%d:%s ", s.Start, s.End, port)
		next = s.End + 1
	}
	if next != numSlots {
		return "", fmt.Errorf("CLUSTER SLOTS does not cover slot %d", next)
	}
	return strings.TrimSpace(b.String()), nil
}

// Client returns a new go-redis cluster client over all nodes, with default
// options. Stop closes it; the caller may close it earlier.
func (c *Cluster) Client() *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	c.mu.Lock()
	c.clients = append(c.clients, rdb)
	c.mu.Unlock()
	return rdb
}

// Stop closes the cluster's clients and closes every node (see Node.Close):
// processes stopped, directories removed. It is final; to take a single node
// down and up again, use Nodes[i].Stop or Kill, then Restart and WaitReady.
// Stopping a stopped cluster returns nil.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	for _, rdb := range c.clients {
		rdb.Close()
	}
	c.clients = nil
	return closeAll(c.Nodes)
}
