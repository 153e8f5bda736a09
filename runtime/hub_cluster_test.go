package runtime_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// The tests of sharded pub/sub on a Redis 7 cluster (issue 11): the choice
// of classic or sharded pub/sub, SSUBSCRIBE on the owner of each channel's
// slot, SPUBLISH from the scripts (no cluster-bus traffic), and
// subscriptions that follow a slot migration.

// ownCluster returns a 3-primary cluster of the test's own (tests here
// read counters that other tests would move) and a backend on it.
func ownCluster(t *testing.T, opts ...redistest.Option) (*redistest.Cluster, backend) {
	c := redistest.NewCluster(t, 3, opts...)
	return c, backend{"own-cluster", func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	}}
}

// newClientWith is newClient with runtime options.
func newClientWith(t testing.TB, b backend, opts ...lockrt.Option) *lockrt.Client {
	rdb := b.new()
	c := lockrt.New(rdb, opts...)
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c
}

// nodeClients returns a client per node of c, closed at the end.
func nodeClients(t *testing.T, c *redistest.Cluster) []*redis.Client { return clientsOf(c.Nodes) }

// clientsOf returns a client per node, closed at the end.
func clientsOf(nodes []*redistest.Node) []*redis.Client {
	out := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		out[i] = n.Client()
	}
	return out
}

// cmdCalls returns the calls per command of INFO commandstats
// ("spublish", "publish", "ssubscribe", ...).
func cmdCalls(t *testing.T, rdb *redis.Client) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for line := range strings.SplitSeq(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
		calls[name] = n
	}
	return calls
}

// busPublishSent returns cluster_stats_messages_publish_sent of CLUSTER
// INFO: the classic PUBLISH messages the node sent on the cluster bus.
func busPublishSent(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.ClusterInfo(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cluster_stats_messages_publish_sent:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0 // not sent yet: the field appears with the first one
}

// shardSubscribers returns PUBSUB SHARDNUMSUB channel on rdb.
func shardSubscribers(t *testing.T, rdb *redis.Client, channel string) int64 {
	t.Helper()
	n, err := rdb.PubSubShardNumSub(context.Background(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// waitSubscribers waits until channel has want sharded subscribers on rdb.
func waitSubscribers(t *testing.T, rdb *redis.Client, channel string, want int64) {
	t.Helper()
	eventually(t, failAfter, func() bool { return shardSubscribers(t, rdb, channel) == want },
		fmt.Sprintf("%s has not %d sharded subscribers on %s", channel, want, rdb.Options().Addr))
}

// keyOn returns a key of the test's own whose slot node i of c serves.
func keyOn(t *testing.T, c *redistest.Cluster, rdb redis.UniversalClient, i int) (string, int) {
	t.Helper()
	ctx := context.Background()
	for v := 0; v < 1000; v++ {
		k := key(t, strconv.Itoa(v))
		slot := int(rdb.ClusterKeySlot(ctx, k).Val())
		if owner, err := c.SlotOwner(ctx, slot); err == nil && owner == i {
			return k, slot
		}
	}
	t.Fatalf("no key on node %d", i)
	return "", 0
}

// awaitAll starts n separate clients awaiting the latch k and returns a
// channel that gets each Await's result.
func awaitAll(t *testing.T, b backend, d *lockrt.LatchDef, k string, n int) <-chan error {
	done := make(chan error, n)
	for range n {
		l := newClientWith(t, b, lockrt.WithShardedPubSub(true)).Latch(d, k)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done <- l.Await(ctx)
		}()
	}
	return done
}

// TestPubSubModeChoice: the choice of pub/sub is made per client: a
// single node and Sentinel use classic pub/sub, a Redis 7 cluster sharded
// pub/sub, and a cluster whose servers do not answer PUBSUB SHARDNUMSUB
// (as Redis < 7.0; here PUBSUB is renamed away) classic.
func TestPubSubModeChoice(t *testing.T) {
	t.Parallel()
	single := backends()[0]
	shared := backends()[1]
	if got := lockrt.PublishCmd(newClientWith(t, single, lockrt.WithShardedPubSub(true))); got != "publish" {
		t.Errorf("single node: %q, want publish", got)
	}
	if got := lockrt.PublishCmd(newClientWith(t, shared, lockrt.WithShardedPubSub(true))); got != "spublish" {
		t.Errorf("Redis 7 cluster: %q, want spublish", got)
	}
	if got := lockrt.PublishCmd(newClientWith(t, shared, lockrt.WithShardedPubSub(false))); got != "publish" {
		t.Errorf("Redis 7 cluster, sharded pub/sub forbidden: %q, want publish", got)
	}
	t.Run("old-cluster", func(t *testing.T) {
		t.Parallel()
		_, b := ownCluster(t, redistest.WithArgs("--rename-command", "PUBSUB", ""))
		if got := lockrt.PublishCmd(newClientWith(t, b, lockrt.WithShardedPubSub(true))); got != "publish" {
			t.Errorf("cluster without PUBSUB SHARDNUMSUB: %q, want publish", got)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		_, b := sentinelBackend(t)
		if got := lockrt.PublishCmd(newClientWith(t, b, lockrt.WithShardedPubSub(true))); got != "publish" {
			t.Errorf("Sentinel: %q, want publish", got)
		}
	})
}

// TestShardedPubSubLatch: on a 3-primary cluster, three clients await a
// latch on each primary's slots; each client subscribes every channel
// with SSUBSCRIBE on its owner (PUBSUB SHARDNUMSUB counts 3 there), the
// count-downs publish with SPUBLISH, and no classic PUBLISH or SUBSCRIBE
// reaches any node, and no publish crosses the cluster bus.
func TestShardedPubSubLatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, b := ownCluster(t)
	nodes := nodeClients(t, c)
	for _, n := range nodes {
		if err := n.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var bus []int64
	for _, n := range nodes {
		bus = append(bus, busPublishSent(t, n))
	}
	d := latchDef(t, 1, time.Minute)
	counter := newClientWith(t, b, lockrt.WithShardedPubSub(true))
	const waiters = 3
	var dones []<-chan error
	for i := range nodes {
		k, _ := keyOn(t, c, counter.Redis(), i)
		dones = append(dones, awaitAll(t, b, d, k, waiters))
		waitSubscribers(t, nodes[i], k+":ch", waiters)
		if left, err := counter.Latch(d, k).CountDown(ctx); err != nil || left != 0 {
			t.Fatalf("CountDown: %d, %v", left, err)
		}
	}
	for _, done := range dones {
		allDone(t, done, waiters, "an Await never returned")
	}
	for i, n := range nodes {
		calls := cmdCalls(t, n)
		t.Logf("node %d: spublish %d, ssubscribe %d, publish %d, subscribe %d; bus publish sent %d -> %d",
			i, calls["spublish"], calls["ssubscribe"], calls["publish"], calls["subscribe"], bus[i], busPublishSent(t, n))
		if calls["spublish"] != 1 || calls["ssubscribe"] < waiters {
			t.Errorf("node %d: %d SPUBLISH (want 1), %d SSUBSCRIBE (want >= %d)", i, calls["spublish"], calls["ssubscribe"], waiters)
		}
		if calls["publish"] != 0 || calls["subscribe"] != 0 {
			t.Errorf("node %d: classic pub/sub used: %d PUBLISH, %d SUBSCRIBE", i, calls["publish"], calls["subscribe"])
		}
		if got := busPublishSent(t, n); got != bus[i] {
			t.Errorf("node %d: cluster_stats_messages_publish_sent moved from %d to %d", i, bus[i], got)
		}
	}
}

// TestShardedPubSubSlotMigration: three clients await a latch; its slot
// migrates to another primary (CLUSTER SETSLOT MIGRATING/IMPORTING,
// MIGRATE, SETSLOT NODE), whose server drops the sharded subscriptions
// with an unsolicited sunsubscribe. Every client subscribes again on the
// new owner, and the count-down there wakes every waiter; then the slot
// moves back, and the same holds.
func TestShardedPubSubSlotMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, b := ownCluster(t)
	nodes := nodeClients(t, c)
	d := latchDef(t, 1, time.Minute)
	counter := newClientWith(t, b, lockrt.WithShardedPubSub(true))
	const waiters = 3
	for round := range 2 {
		t.Run(fmt.Sprint("round=", round), func(t *testing.T) {
			k, slot := keyOn(t, c, counter.Redis(), round)
			ch := k + ":ch"
			if ok, err := counter.Latch(d, k).TrySetCount(ctx, 1); err != nil || !ok {
				t.Fatalf("TrySetCount: %v, %v", ok, err)
			}
			done := awaitAll(t, b, d, k, waiters)
			waitSubscribers(t, nodes[round], ch, waiters)
			to := (round + 1) % len(nodes)
			if err := c.MigrateSlot(ctx, slot, to); err != nil {
				t.Fatal(err)
			}
			waitSubscribers(t, nodes[to], ch, waiters)
			if n := shardSubscribers(t, nodes[round], ch); n != 0 {
				t.Errorf("%d subscribers left on the old owner", n)
			}
			select {
			case err := <-done:
				t.Fatalf("an Await returned before the count-down: %v", err)
			default:
			}
			if left, err := counter.Latch(d, k).CountDown(ctx); err != nil || left != 0 {
				t.Fatalf("CountDown: %d, %v", left, err)
			}
			allDone(t, done, waiters, "an Await never returned")
		})
	}
}

// shardChannels returns how many sharded channels matching pattern have
// subscribers on rdb (PUBSUB SHARDCHANNELS).
func shardChannels(t *testing.T, rdb *redis.Client, pattern string) int {
	t.Helper()
	chs, err := rdb.PubSubShardChannels(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(chs)
}

// waitShardChannels waits until rdb has want sharded channels matching
// pattern.
func waitShardChannels(t *testing.T, rdb *redis.Client, pattern string, want int) {
	t.Helper()
	eventually(t, failAfter, func() bool { return shardChannels(t, rdb, pattern) == want },
		fmt.Sprintf("not %d sharded channels %s on %s", want, pattern, rdb.Options().Addr))
}

// TestShardedPubSubLocks: 1000 lock/unlock cycles of two clients taking
// turns on one lock of a 3-primary cluster (a waiter present at each
// release) wake waiters with SPUBLISH only: no node runs a classic PUBLISH
// or SUBSCRIBE, and cluster_stats_messages_publish_sent does not move on
// any node.
func TestShardedPubSubLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, b := ownCluster(t)
	nodes := nodeClients(t, c)
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	k := key(t)
	var locks []*lockrt.Lock
	for range 2 {
		locks = append(locks, newClientWith(t, b, lockrt.WithShardedPubSub(true)).Lock(d, k))
	}
	cycle := func(l *lockrt.Lock) func() error {
		return func() error {
			le, err := l.Lock(ctx)
			if err == nil {
				err = le.Unlock(ctx)
			}
			return err
		}
	}
	assertShardedPubSubOnly(t, nodes, 1000, cycle(locks[0]), cycle(locks[1]))
}

// assertShardedPubSubOnly resets the stats of a cluster's nodes, runs
// cycles calls of the given loop bodies in all (each on a client of its
// own, taking turns with the others: a waiter is often present), and
// checks that waiters were woken with SPUBLISH only: some SPUBLISH ran, no
// node ran a classic PUBLISH or SUBSCRIBE, and
// cluster_stats_messages_publish_sent moved on none.
func assertShardedPubSubOnly(t *testing.T, nodes []*redis.Client, cycles int, workers ...func() error) {
	t.Helper()
	var bus []int64
	for _, n := range nodes {
		if err := n.ConfigResetStat(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		bus = append(bus, busPublishSent(t, n))
	}
	left := make(chan struct{}, cycles)
	for range cycles {
		left <- struct{}{}
	}
	close(left)
	errs := make(chan error, len(workers))
	for _, cycle := range workers {
		go func() {
			for range left {
				if err := cycle(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var spublish int64
	for i, n := range nodes {
		calls := cmdCalls(t, n)
		spublish += calls["spublish"]
		t.Logf("node %d: spublish %d, ssubscribe %d, publish %d, subscribe %d; bus publish sent %d -> %d",
			i, calls["spublish"], calls["ssubscribe"], calls["publish"], calls["subscribe"], bus[i], busPublishSent(t, n))
		if calls["publish"] != 0 || calls["subscribe"] != 0 {
			t.Errorf("node %d: classic pub/sub used: %d PUBLISH, %d SUBSCRIBE", i, calls["publish"], calls["subscribe"])
		}
		if got := busPublishSent(t, n); got != bus[i] {
			t.Errorf("node %d: cluster_stats_messages_publish_sent moved from %d to %d", i, bus[i], got)
		}
	}
	if spublish == 0 {
		t.Errorf("no SPUBLISH in %d cycles with a waiter", cycles)
	}
}

// TestShardedPubSubLockMigration: a lock is held and three clients wait
// for it (registered in its waiter registry); its slot migrates to another
// primary while they wait. Every waiter's channel is subscribed again on
// the new owner (PUBSUB SHARDCHANNELS), none is left on the old one, the
// registry (read on the new owner) still holds the three, and after the
// holder unlocks every waiter acquires within 10s: through wake-ups on
// the new owner, since the fallbacks are 20s away (WaiterTTL 1 minute:
// refresh every 20s; the held lease's remaining 20-30s).
func TestShardedPubSubLockMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, b := ownCluster(t)
	nodes := nodeClients(t, c)
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)
	d.WaiterTTL = time.Minute // no refresh wakes a waiter during the test
	holder := newClientWith(t, b, lockrt.WithShardedPubSub(true))
	k, slot := keyOn(t, c, holder.Redis(), 0)
	le, err := holder.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 3
	done := make(chan error, waiters)
	for range waiters {
		l := newClientWith(t, b, lockrt.WithShardedPubSub(true)).Lock(d, k)
		go func() {
			le, err := l.Lock(ctx)
			if err == nil {
				err = le.Unlock(ctx)
			}
			done <- err
		}()
	}
	migrateWhileWaiting(t, c, nodes, holder.Redis(), k, slot, func() error { return le.Unlock(ctx) }, done, waiters)
}

// migrateWhileWaiting: waiters wait for the object k (its channels on
// nodes[0], their results to come on done), held by a client on rdb until
// release; k's slot migrates to nodes[1]. Every waiter's channel is
// subscribed again on the new owner and none is left on the old one, the
// registry (read on the new owner) still holds them, none returns before
// the release, and after it every waiter gets the object within 10s.
func migrateWhileWaiting(t *testing.T, c *redistest.Cluster, nodes []*redis.Client, rdb redis.UniversalClient, k string, slot int,
	release func() error, done <-chan error, waiters int) {
	t.Helper()
	pattern := k + ":ch*"
	waitShardChannels(t, nodes[0], pattern, waiters)
	waitRegistered(t, rdb, k, int64(waiters))
	if err := c.MigrateSlot(context.Background(), slot, 1); err != nil {
		t.Fatal(err)
	}
	waitShardChannels(t, nodes[1], pattern, waiters)
	if n := shardChannels(t, nodes[0], pattern); n != 0 {
		t.Errorf("%d channels still subscribed on the old owner", n)
	}
	waitRegistered(t, rdb, k, int64(waiters))
	select {
	case err := <-done:
		t.Fatalf("a waiter returned while the object was held: %v", err)
	default:
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for i := range waiters {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("%d of %d waiters got it within 10s of the release after the migration", i, waiters)
		}
	}
}

// TestConnectionsFlatInObjects: the connections a client opens on a
// 3-primary cluster do not grow with the objects it waits on (what
// docs/operations.md says a client holds). One waiter at a time, each
// wait a first wait on a new lock (an attempt, a subscription and the
// read after it, then the lock handed over): the waits on a lock on each
// primary open the client's connections (a command, a pipeline and a
// pub/sub connection per primary: 9, and 10 or 11 in some runs, where the
// client's heartbeat or its read of the slot map ran beside a wait's
// command and go-redis dialled a connection more; at most 15 here), and
// 21 waits on new locks after them open none (at most 3, for such
// collisions: not one per object).
func TestConnectionsFlatInObjects(t *testing.T) {
	t.Parallel()
	_, b := ownCluster(t)
	ctx := context.Background()
	admin := b.new().(*redis.ClusterClient)
	defer admin.Close()
	holder := newClient(t, b)
	var dials atomic.Int64
	wrdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: admin.Options().Addrs, Dialer: redistest.CountingDialer(&dials)})
	waiter := lockrt.New(wrdb)
	t.Cleanup(func() {
		waiter.Close()
		wrdb.Close()
	})
	d := def(t, lockrt.Reentrant, 30*time.Second, true, time.Minute)

	// waitOn makes the waiter wait on k until the holder lets go.
	waitOn := func(k string) {
		t.Helper()
		le, err := holder.Lock(d, k).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := lockThenUnlock(ctx, waiter.Lock(d, k).Lock)
		waitQueued(t, admin, k, 1)
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		allDone(t, done, 1, "the waiter did not get the lock after the release")
	}

	// A lock on each primary first.
	seen := map[string]bool{}
	var first, later []string
	for i := 0; len(first) < 3 || len(later) < 21; i++ {
		k := key(t, strconv.Itoa(i))
		m, err := admin.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; !seen[addr] {
			seen[addr] = true
			first = append(first, k)
		} else if len(later) < 21 {
			later = append(later, k)
		}
	}
	for _, k := range first {
		waitOn(k)
	}
	opened := dials.Load()
	if opened > 15 {
		t.Errorf("waits on a lock on each of 3 primaries opened %d connections, want at most 15", opened)
	}
	for _, k := range later {
		waitOn(k)
	}
	if n := dials.Load() - opened; n > 3 {
		t.Errorf("21 waits on new locks after those opened %d connections more, want none (3 at most)", n)
	}
	t.Logf("connections: %d for the first waits on 3 primaries, %d more for 21 waits after them", opened, dials.Load()-opened)
}
