package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchkinds"
	"github.com/lockgen/lockgen/scripts/bench/benchsems"
)

// busPublish names, in a cluster's stats, the publish messages its nodes
// sent on the cluster bus (CLUSTER INFO cluster_stats_messages_publish_sent).
const busPublish = "bus_publish"

// clusterStats sums INFO commandstats over nodes, and the cluster bus's
// publish messages as busPublish.
func clusterStats(tb testing.TB, nodes []*redis.Client) map[string]int64 {
	out := nodesStats(tb, nodes)
	out[busPublish] = busPublishSent(tb, nodes)
	return out
}

// nodesStats sums INFO commandstats (calls by command name) over nodes.
func nodesStats(tb testing.TB, nodes []*redis.Client) map[string]int64 {
	out := map[string]int64{}
	for _, n := range nodes {
		info, err := n.Info(context.Background(), "commandstats").Result()
		if err != nil {
			tb.Fatal(err)
		}
		for name, c := range parseCommandStats(tb, info) {
			out[name] += c.calls
		}
	}
	return out
}

// busPublishSent sums the publish messages nodes sent on the cluster bus
// (CLUSTER INFO cluster_stats_messages_publish_sent).
func busPublishSent(tb testing.TB, nodes []*redis.Client) int64 {
	var sent int64
	for _, n := range nodes {
		ci, err := n.ClusterInfo(context.Background()).Result()
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.Lines(ci) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_stats_messages_publish_sent:"); ok {
				k, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					tb.Fatal(err)
				}
				sent += k
			}
		}
	}
	return sent
}

// clusterHerdLib is one library of BenchmarkHerdCluster: open returns a
// locker over rdb.
type clusterHerdLib struct {
	name string
	open func(tb testing.TB, rdb *redis.ClusterClient) locker
}

// clusterHerdLibs open BenchmarkHerdCluster's lockers, each over a
// cluster client of its own: lockgen's reentrant lock (sharded pub/sub,
// the default on a Redis 7 cluster), its other exclusive kinds, the
// writers of its read-write lock and its semaphore of one permit, and
// redislock retrying every 1ms. HERD_LIBS picks among them by name.
var clusterHerdLibs = []clusterHerdLib{
	{"lockgen", func(tb testing.TB, rdb *redis.ClusterClient) locker {
		return &lockgenLocker{take: newLocks(tb, rdb).Resource}
	}},
	{lockgenFair.name, clusterKind(func(l *benchkinds.Locks, id string) *lockrt.Lock { return l.FairResource(id) })},
	{lockgenFenced.name, clusterKind(func(l *benchkinds.Locks, id string) *lockrt.Lock { return l.FencedResource(id) })},
	{lockgenSimple.name, func(tb testing.TB, rdb *redis.ClusterClient) locker {
		return &lockgenLocker{take: newLocks(tb, rdb).SimpleResource}
	}},
	{lockgenWrite.name, clusterKind(func(l *benchkinds.Locks, id string) *lockrt.Lock { return l.Table(id).Write() })},
	{"lockgen-sem", func(tb testing.TB, rdb *redis.ClusterClient) locker {
		c := lockrt.New(rdb)
		tb.Cleanup(func() { c.Close() })
		if err := benchsems.Preload(context.Background(), c); err != nil {
			tb.Fatal(err)
		}
		return semLocker{&lockgenSem{s: benchsems.NewSemaphores(c).Single("cherd")}}
	}},
	{"redislock", func(tb testing.TB, rdb *redis.ClusterClient) locker {
		return &redislockLocker{c: redislock.New(rdb), retry: func() redislock.RetryStrategy { return redislock.LinearBackoff(time.Millisecond) }}
	}},
}

// BenchmarkHerdCluster is BenchmarkHerd on a 3-primary cluster: N = 8,
// 32, 64 lockers, each over a cluster client of its own, loop lock, a 1ms
// hold, unlock on one lock, 1000 acquisitions per run, lockgen and
// redislock in rotated order per round; medians of the rounds. Counted
// over every node: scripts and commands per acquisition, and the publish
// messages sent on the cluster bus (0 when wake-ups use SPUBLISH).
func BenchmarkHerdCluster(b *testing.B) {
	_, nodes := startBenchCluster(b)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Options().Addr
	}
	libs := keepLibs(clusterHerdLibs, func(l clusterHerdLib) string { return l.name })
	var names []string
	for _, l := range libs {
		names = append(names, l.name)
	}
	for _, n := range herdNs() {
		for _, hold := range herdHolds() {
			b.Run(fmt.Sprintf("N=%d/hold=%v", n, hold), func(b *testing.B) {
				lockers := make([][]locker, len(libs))
				for i, lib := range libs {
					for range n {
						rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
						b.Cleanup(func() { rdb.Close() })
						dialPrimaries(b, rdb)
						l := lib.open(b, rdb)
						warmUp(b, l)
						lockers[i] = append(lockers[i], l)
					}
				}
				runs := herdRounds(b, lockers, fmt.Sprintf("cherd%d-%v", n, hold), hold, func() map[string]int64 { return clusterStats(b, nodes) })
				reportHerd(b, fmt.Sprintf("cluster N=%d hold=%v", n, hold), names, runs, true)
			})
		}
	}
}

// dialPrimaries connects rdb to every primary, as a service's long-lived
// client is: a PING each, and a PING in a pipeline each, for go-redis
// keeps a pool of connections for pipelines apart from the one for
// commands (PipelinePoolSize), and a waiter's first read of the object it
// waits on is a pipeline. The rounds count what acquisitions cost, not
// what a client pays once for its first connection of each pool to a
// primary (a dial and its HELLO), which the round whose lock sits on a
// primary new to the clients would otherwise count (HERD_COLD=1 leaves it
// out).
func dialPrimaries(tb testing.TB, rdb *redis.ClusterClient) {
	if os.Getenv("HERD_COLD") != "" {
		return
	}
	err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		if err := m.Ping(ctx).Err(); err != nil {
			return err
		}
		_, err := m.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() })
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// clusterKind opens one of the locks of benchkinds over a cluster client.
func clusterKind(which func(*benchkinds.Locks, string) *lockrt.Lock) func(testing.TB, *redis.ClusterClient) locker {
	return func(tb testing.TB, rdb *redis.ClusterClient) locker {
		locks := newKinds(tb, rdb)
		return &lockgenLocker{take: func(id string) *lockrt.Lock { return which(locks, id) }}
	}
}

// clusterLibNames are the names of clusterHerdLibs.
func clusterLibNames() []string {
	var names []string
	for _, l := range clusterHerdLibs {
		names = append(names, l.name)
	}
	return names
}
