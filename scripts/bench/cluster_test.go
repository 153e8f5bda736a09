package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchlocks"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// What releases cost a Redis Cluster (issue 11): on a 3-primary cluster,
// lock/unlock cycles of the reentrant lock with a waiter present (two
// clients taking turns) and alone (one client), counting on every node the
// classic PUBLISH and sharded SPUBLISH calls (INFO commandstats) and the
// publish messages sent on the cluster bus (CLUSTER INFO
// cluster_stats_messages_publish_sent). A classic PUBLISH on a cluster is
// copied to every other node; an SPUBLISH stays on its shard.

// clusterCounts are the counters summed over the cluster's nodes.
type clusterCounts struct {
	publish, spublish, subscribe, ssubscribe, busPublish, cmds int64
}

func (a clusterCounts) minus(b clusterCounts) clusterCounts {
	return clusterCounts{a.publish - b.publish, a.spublish - b.spublish, a.subscribe - b.subscribe,
		a.ssubscribe - b.ssubscribe, a.busPublish - b.busPublish, a.cmds - b.cmds}
}

// readClusterCounts sums the counters of every node of c.
func readClusterCounts(tb testing.TB, nodes []*redis.Client) clusterCounts {
	stats := nodesStats(tb, nodes)
	out := clusterCounts{publish: stats["publish"], spublish: stats["spublish"], subscribe: stats["subscribe"],
		ssubscribe: stats["ssubscribe"], busPublish: busPublishSent(tb, nodes)}
	for _, n := range stats {
		out.cmds += n
	}
	return out
}

// clusterMode is how the runtime clients of a run wait.
type clusterMode struct {
	name string
	opts []lockrt.Option
}

var clusterModes = []clusterMode{
	{"default", nil}, // sharded pub/sub on Redis 7, as the runtime chooses
	{"classic", []lockrt.Option{lockrt.WithClassicPubSub()}},
}

// clusterCycles makes cycles lock/unlock cycles of one Resource lock on c:
// with waiter, two clients (each its own go-redis cluster client and
// runtime client) take turns, so that each release has a waiter; alone,
// one client. It returns the counters' change over the cycles.
func clusterCycles(tb testing.TB, c *redistest.Cluster, nodes []*redis.Client, mode clusterMode, waiter bool, cycles int) clusterCounts {
	ctx := context.Background()
	clients := 1
	if waiter {
		clients = 2
	}
	id := mode.name + strconv.FormatBool(waiter) + strconv.Itoa(cycles)
	var locks []*lockrt.Lock
	for range clients {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
		rt := lockrt.New(rdb, mode.opts...)
		tb.Cleanup(func() {
			rt.Close()
			rdb.Close()
		})
		if err := benchlocks.Preload(ctx, rt); err != nil {
			tb.Fatal(err)
		}
		locks = append(locks, benchlocks.NewLocks(rt).Resource(id))
	}
	// One cycle first: subscriptions and script loading are not counted.
	for _, l := range locks {
		le, err := l.Lock(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		if err := le.Unlock(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	before := readClusterCounts(tb, nodes)
	var left atomic.Int64
	left.Store(int64(cycles))
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				le, err := l.Lock(ctx)
				if err != nil {
					tb.Error(err)
					return
				}
				if err := le.Unlock(ctx); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return readClusterCounts(tb, nodes).minus(before)
}

func startBenchCluster(tb testing.TB) (*redistest.Cluster, []*redis.Client) {
	c := redistest.NewCluster(tb, 3)
	var nodes []*redis.Client
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Client())
	}
	return c, nodes
}

// BenchmarkClusterPublish: b.N lock/unlock cycles on a 3-primary cluster
// (-benchtime 10000x for the 10 000), per mode and with or without
// a waiter; it reports per cycle the classic PUBLISH, SPUBLISH and
// cluster-bus publish messages, and all commands, summed over the nodes.
func BenchmarkClusterPublish(b *testing.B) {
	c, nodes := startBenchCluster(b)
	for _, mode := range clusterModes {
		for _, waiter := range []bool{true, false} {
			name := mode.name + "/alone"
			if waiter {
				name = mode.name + "/waiter"
			}
			b.Run(name, func(b *testing.B) {
				d := clusterCycles(b, c, nodes, mode, waiter, b.N)
				n := float64(b.N)
				b.ReportMetric(float64(d.publish)/n, "publish/op")
				b.ReportMetric(float64(d.spublish)/n, "spublish/op")
				b.ReportMetric(float64(d.busPublish)/n, "bus-publish/op")
				b.ReportMetric(float64(d.cmds)/n, "cmds/op")
				b.Logf("%d cycles: %d PUBLISH, %d SPUBLISH, %d SUBSCRIBE, %d SSUBSCRIBE, %d bus publish messages, %d commands",
					b.N, d.publish, d.spublish, d.subscribe, d.ssubscribe, d.busPublish, d.cmds)
			})
		}
	}
}

// TestClusterPublish is BenchmarkClusterPublish with 500 cycles per case,
// asserting its counts, summed over the 3 primaries: by default (sharded
// pub/sub), with a waiter, 0 classic PUBLISH, some SPUBLISH and no
// publish message on the cluster bus; alone, no publish of any kind. With
// classic pub/sub, alone publishes nothing either, and with a waiter the
// PUBLISH calls and the bus messages they cause are seen (the counters
// this test reads do move).
func TestClusterPublish(t *testing.T) {
	c, nodes := startBenchCluster(t)
	const cycles = 500
	for _, mode := range clusterModes {
		for _, waiter := range []bool{true, false} {
			d := clusterCycles(t, c, nodes, mode, waiter, cycles)
			t.Logf("%s, waiter %v, %d cycles: %d PUBLISH, %d SPUBLISH, %d SUBSCRIBE, %d SSUBSCRIBE, %d bus publish messages, %d commands",
				mode.name, waiter, cycles, d.publish, d.spublish, d.subscribe, d.ssubscribe, d.busPublish, d.cmds)
			switch {
			case !waiter && d.publish+d.spublish+d.busPublish != 0:
				t.Errorf("%s: %d cycles without a waiter published: %d PUBLISH, %d SPUBLISH, %d bus messages, want none",
					mode.name, cycles, d.publish, d.spublish, d.busPublish)
			case waiter && mode.name == "default" && (d.publish != 0 || d.busPublish != 0 || d.spublish == 0):
				t.Errorf("sharded: %d cycles with a waiter: %d PUBLISH, %d bus messages, %d SPUBLISH; want 0, 0 and some",
					cycles, d.publish, d.busPublish, d.spublish)
			case waiter && mode.name == "classic" && (d.publish == 0 || d.busPublish == 0):
				t.Errorf("classic: %d cycles with a waiter: %d PUBLISH, %d bus messages; want both above 0", cycles, d.publish, d.busPublish)
			}
		}
	}
}
