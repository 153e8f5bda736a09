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

// Cluster is a Redis Cluster of primaries, one Node each, with the 16384
// slots split evenly between them in order: Nodes[0] serves the lowest.
// Started WithReplicas(n), every primary also has n replicas.
type Cluster struct {
	// Nodes are the primaries. KillPrimary puts the promoted replica in
	// the place of the primary it killed: do not read them while it runs.
	Nodes []*Node
	// Replicas are the replicas, n per primary in the primaries' order:
	// Replicas[i*n : (i+1)*n] replicate Nodes[i]. KillPrimary puts the
	// killed primary in the place of the replica it promoted.
	Replicas []*Node
	Addrs    []string // every node's Addr, for redis.ClusterOptions.Addrs

	replicas int // per primary

	mu      sync.Mutex
	clients []*redis.ClusterClient
	stopped bool
}

// all returns the primaries and the replicas.
func (c *Cluster) all() []*Node { return append(slices.Clone(c.Nodes), c.Replicas...) }

// StartCluster starts a cluster of the given number of primaries (and,
// WithReplicas(n), n replicas of each) and returns once it is ready, as
// defined by WaitReady: about 2.1s, because Redis holds a new primary in
// cluster_state:fail for 2s. Options apply to every node.
// It returns ErrNotFound when redis-server is not in PATH; on any error, the
// nodes already started are closed.
func StartCluster(primaries int, opts ...Option) (*Cluster, error) {
	if primaries < 1 || primaries > numSlots {
		return nil, fmt.Errorf("redistest: a cluster needs 1..%d primaries, got %d", numSlots, primaries)
	}
	cfg := newConfig(opts)
	cfg.cluster = true
	if cfg.replicas < 0 {
		return nil, fmt.Errorf("redistest: %d replicas per primary", cfg.replicas)
	}
	if cfg.replicas > 0 {
		// A diskless sync waits 5s (repl-diskless-sync-delay) for more
		// replicas before it starts.
		cfg.args = append([]string{"--repl-diskless-sync", "no"}, cfg.args...)
	}
	nodes, err := startMany(primaries*(1+cfg.replicas), cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Nodes: nodes[:primaries:primaries], Replicas: nodes[primaries:], replicas: cfg.replicas}
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
	nodes := c.all()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr})
		defer clients[i].Close()
	}
	for i, rdb := range clients[:len(c.Nodes)] {
		lo, hi := i*numSlots/len(c.Nodes), (i+1)*numSlots/len(c.Nodes)-1
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
		for _, n := range nodes[i+1:] {
			if err := rdb.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(n.Port)).Err(); err != nil {
				return fmt.Errorf("redistest: CLUSTER MEET %s on %s: %w", n.Addr, c.Addrs[i], err)
			}
		}
	}
	// A replica can follow its primary once it knows it.
	for r, rdb := range clients[len(c.Nodes):] {
		primary := clients[r/c.replicas]
		id, err := primary.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER MYID on %s: %w", primary.Options().Addr, err)
		}
		err = waitFor(ctx, func() error { return rdb.Do(ctx, "CLUSTER", "REPLICATE", id).Err() })
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER REPLICATE %s on %s: %w", id, rdb.Options().Addr, err)
		}
	}
	return nil
}

// WaitReady polls every running node, every 20ms, until each reports
// cluster_state:ok and knows every node, all of them return the same
// slot-to-node map for all 16384 slots in CLUSTER SLOTS, and every replica
// of a running primary is in sync with it. It returns the last
// disagreement when ctx ends. Use it after restarting a node, which also
// takes 2s to report cluster_state:ok again.
func (c *Cluster) WaitReady(ctx context.Context) error {
	nodes := c.all()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		defer clients[i].Close()
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := c.check(ctx, nodes, clients)
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

// check returns nil if the running ones of nodes (the primaries first)
// are ready, or the first problem found.
func (c *Cluster) check(ctx context.Context, nodes []*Node, clients []*redis.Client) error {
	var want string
	first := true
	for i, rdb := range clients {
		n := nodes[i]
		if !n.Running() {
			continue
		}
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", n.Addr, err)
		}
		for _, field := range []string{
			"cluster_state:ok",
			"cluster_slots_assigned:" + strconv.Itoa(numSlots),
			"cluster_known_nodes:" + strconv.Itoa(len(nodes)),
		} {
			if !strings.Contains(info, field+"\r\n") {
				return fmt.Errorf("%s: CLUSTER INFO lacks %s", n.Addr, field)
			}
		}
		if i >= len(c.Nodes) {
			if p := c.Nodes[(i-len(c.Nodes))/c.replicas]; p.Running() {
				repl, err := rdb.Info(ctx, "replication").Result()
				if err != nil {
					return fmt.Errorf("INFO replication on %s: %w", n.Addr, err)
				}
				for _, field := range []string{"role:slave", "master_port:" + strconv.Itoa(p.Port), "master_link_status:up"} {
					if !strings.Contains(repl, field+"\r\n") {
						return fmt.Errorf("%s: INFO replication lacks %s", n.Addr, field)
					}
				}
			}
		}
		slots, err := rdb.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER SLOTS on %s: %w", n.Addr, err)
		}
		got, err := slotMap(slots)
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		if first {
			want, first = got, false
		} else if got != want {
			return fmt.Errorf("nodes disagree on CLUSTER SLOTS: %s vs %s at %s", want, got, n.Addr)
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
	return closeAll(c.all())
}

// KillPrimary kills primary i (SIGKILL, like a crash) and waits until one
// of its replicas has been elected in its place and every running node
// agrees on the new slot map (WaitReady). That takes the cluster's node
// timeout (5s unless WithArgs sets --cluster-node-timeout) plus about a
// second. It returns the promoted replica, which becomes Nodes[i]; the
// killed node takes its place in Replicas (restarted, it rejoins as a
// replica of the promoted one). If ctx has no deadline, it gives up after
// the node timeout plus 20s. It fails for a primary without replicas.
func (c *Cluster) KillPrimary(ctx context.Context, i int) (*Node, error) {
	if i < 0 || i >= len(c.Nodes) || c.replicas == 0 {
		return nil, fmt.Errorf("redistest: no primary %d with replicas to promote", i)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 20*time.Second+c.nodeTimeout())
		defer cancel()
	}
	old := c.Nodes[i]
	replicas := c.Replicas[i*c.replicas : (i+1)*c.replicas]
	if err := old.Kill(); err != nil {
		return nil, err
	}
	var promoted int
	err := waitFor(ctx, func() error {
		for j, r := range replicas {
			if !r.Running() {
				continue
			}
			rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
			role, err := rdb.Do(ctx, "ROLE").Slice()
			rdb.Close()
			if err == nil && len(role) > 0 && role[0] == "master" {
				promoted = j
				return nil
			}
		}
		return fmt.Errorf("no replica of %s promoted", old.Addr)
	})
	if err != nil {
		return nil, fmt.Errorf("redistest: killing primary %s: %w", old.Addr, err)
	}
	next := replicas[promoted]
	c.Nodes[i], replicas[promoted] = next, old
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	return next, nil
}

// nodeTimeout returns the cluster's --cluster-node-timeout.
func (c *Cluster) nodeTimeout() time.Duration {
	ms := 5000
	args := c.Nodes[0].args
	for j := len(args) - 2; j >= 0; j-- {
		if args[j] == "--cluster-node-timeout" {
			if v, err := strconv.Atoi(args[j+1]); err == nil {
				ms = v
			}
			break
		}
	}
	return time.Duration(ms) * time.Millisecond
}
