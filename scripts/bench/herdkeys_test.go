package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// keysShape is the load of BenchmarkHerdKeys: services with many keyed
// objects. clients processes' worth of clients (each its own go-redis
// client and, for lockgen, its own runtime client), each with lockers
// goroutines, lock keys picked at random among keys, hold each for hold,
// perLocker times.
type keysShape struct {
	clients, lockers, keys, perLocker int
	hold                              time.Duration
}

// keysResult is what one run of a keysShape measured.
type keysResult struct {
	acquisitions int
	perAcq       map[string]float64 // Redis commands per acquisition, by command ("all": every command)
	waitP50      time.Duration      // Lock's duration (taking included)
	waitP99      time.Duration
	peakChannels int           // the most pub/sub channels subscribed at once (INFO stats, classic and sharded)
	peakGor      int           // the most goroutines of this process at once, lockers included
	redisCPU     time.Duration // redis-server's CPU time per acquisition
	clientCPU    time.Duration // this process's CPU time per acquisition (every client's)
	drained      bool          // every channel was unsubscribed within drainWait of the last unlock
}

// subscribedChannels returns how many pub/sub channels, classic and
// sharded, have subscribers on node, from INFO stats (PUBSUB CHANNELS
// would list them all: with hundreds subscribed, polling it cost Redis
// more than the locking it measured). It may run on any goroutine: an
// error fails tb (Error, not Fatal) and counts as -1 channels.
func subscribedChannels(tb testing.TB, rdb *redis.Client) int {
	s, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		tb.Error(err)
		return -1
	}
	n := 0
	for line := range strings.Lines(s) {
		for _, field := range []string{"pubsub_channels:", "pubsubshard_channels:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field); ok {
				k, err := strconv.Atoi(v)
				if err != nil {
					tb.Error(err)
					return -1
				}
				n += k
			}
		}
	}
	return n
}

// runKeys runs shape once on target with lockers (lockers[c][g]: client
// c's g-th), ids prefixed by id.
func runKeys(tb testing.TB, target procTarget, shape keysShape, lockers [][]locker, id string) keysResult {
	ctx := context.Background()
	var peakCh, peakGor atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if c := int64(target.channels()); c > peakCh.Load() {
				peakCh.Store(c)
			}
			if g := int64(goruntime.NumGoroutine()); g > peakGor.Load() {
				peakGor.Store(g)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	before, cpu0, self0 := target.stats(), target.cpu(), selfCPU(tb)
	var (
		mu    sync.Mutex
		waits []time.Duration
		wg    sync.WaitGroup
		fail  atomic.Value
	)
	for c := range lockers {
		for g, l := range lockers[c] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(c), uint64(g)))
				mine := make([]time.Duration, 0, shape.perLocker)
				for range shape.perLocker {
					key := id + "-" + strconv.Itoa(r.IntN(shape.keys))
					start := time.Now()
					if err := l.lock(ctx, key); err != nil {
						fail.Store(fmt.Errorf("lock %s: %w", key, err))
						return
					}
					mine = append(mine, time.Since(start))
					time.Sleep(shape.hold)
					if err := l.unlock(ctx); err != nil {
						fail.Store(fmt.Errorf("unlock %s: %w", key, err))
						return
					}
				}
				mu.Lock()
				waits = append(waits, mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	// A lockgen client keeps a channel subscribed for 30 s after its last
	// waiter (the hub's linger): its unsubscribes belong to this run, not
	// to the next library's.
	drained := waitDrained(target)
	close(stop)
	<-sampled
	after, cpu1, self1 := target.stats(), target.cpu(), selfCPU(tb)
	if err, _ := fail.Load().(error); err != nil {
		tb.Fatal(err)
	}
	res := keysResult{acquisitions: len(waits), perAcq: map[string]float64{},
		peakChannels: int(peakCh.Load()), peakGor: int(peakGor.Load()), drained: drained}
	res.redisCPU = (cpu1 - cpu0) / time.Duration(max(1, len(waits)))
	res.clientCPU = (self1 - self0) / time.Duration(max(1, len(waits)))
	var all int64
	for name, n := range after {
		d := n - before[name]
		if name == "info" || name == "cluster|info" {
			continue // the probe's and the counters' own
		}
		res.perAcq[name] = float64(d) / float64(len(waits))
		if name == busPublish {
			continue // cluster-bus messages, not commands
		}
		all += d
	}
	res.perAcq["all"] = float64(all) / float64(len(waits))
	slices.Sort(waits)
	res.waitP50, res.waitP99 = percentile(waits, 50), percentile(waits, 99)
	return res
}

// drainWait bounds how long a lockgen client's channels stay subscribed
// after its last waiter left: the hub's linger (30 s:
// runtime/internal/hub's Linger), and some slack.
const drainWait = 35 * time.Second

// waitDrained waits up to drainWait until no pub/sub channel of target
// has a subscriber, and reports whether none has.
func waitDrained(target procTarget) bool {
	for deadline := time.Now().Add(drainWait); ; time.Sleep(50 * time.Millisecond) {
		if target.channels() == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// keysLockgen opens shape's lockgen lockers over target: each client one
// runtime client (over a node's or a cluster's go-redis client) whose
// lockers share it, as the goroutines of one service replica do.
func keysLockgen(tb testing.TB, shape keysShape, target procTarget) [][]locker {
	lg := make([][]locker, shape.clients)
	for c := range lg {
		if len(target.addrs) == 1 {
			lg[c] = lockgenShared.group(tb, shape.lockers)
		} else {
			lg[c] = clusterGroup(tb, target.addrs, shape.lockers)
		}
	}
	return lg
}

// keysLibs opens shape's lockers for lockgen (each client one runtime
// client whose lockers share it: one service replica) and redislock
// (each client one go-redis client, retrying every millisecond), over
// target (on a cluster, each client a cluster client).
func keysLibs(tb testing.TB, shape keysShape, target procTarget) (names []string, lockers [][][]locker) {
	rl := make([][]locker, shape.clients)
	retry := func() redislock.RetryStrategy { return redislock.LinearBackoff(time.Millisecond) }
	for c := range shape.clients {
		var rdb redis.Scripter
		if len(target.addrs) == 1 {
			rdb = newRedis(tb)
		} else {
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: target.addrs})
			tb.Cleanup(func() { cc.Close() })
			rdb = cc
		}
		rc := redislock.New(rdb)
		for range shape.lockers {
			rl[c] = append(rl[c], &redislockLocker{c: rc, retry: retry})
		}
	}
	return []string{"lockgen", "redislock"}, [][][]locker{keysLockgen(tb, shape, target), rl}
}

// clusterGroup returns n lockgen lockers sharing one runtime client over
// a new cluster client of addrs.
func clusterGroup(tb testing.TB, addrs []string, n int) []locker {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	tb.Cleanup(func() { rdb.Close() })
	take := newLocks(tb, rdb).Resource
	ls := make([]locker, n)
	for i := range ls {
		ls[i] = &lockgenLocker{take: take}
	}
	return ls
}

// subscribes sums a run's subscription commands per acquisition, classic
// and sharded, subscribes and unsubscribes.
func (r keysResult) subscribes() float64 {
	return r.perAcq["subscribe"] + r.perAcq["ssubscribe"] + r.perAcq["unsubscribe"] + r.perAcq["sunsubscribe"]
}

// BenchmarkHerdKeys is the herd over many keyed objects: 8 clients x 16
// goroutines lock keys picked at random among 1 000 (or 10 000), 1 ms
// hold, 40 acquisitions per goroutine (5 120 per run), lockgen and
// redislock (1 ms retry) in rotated rounds. It reports per acquisition
// the Redis commands (all, EVALSHA, and lockgen's subscription traffic:
// SUBSCRIBE/SSUBSCRIBE and their unsubscribes), redis-server's and this
// process's CPU time, the Lock call's p50/p99, the most pub/sub channels
// subscribed at once and the process's most goroutines: what waiting on
// many keys costs, and whether it grows with the keys. A run ends when no
// channel is subscribed any more, so that a lockgen client's lingering
// channels are counted in its own run.
//
//	go test -v -run '^$' -bench 'HerdKeys$' -benchtime 3x
func BenchmarkHerdKeys(b *testing.B) {
	for _, keys := range []int{1000, 10000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			flush(b)
			benchKeys(b, singleTarget(b), keys, "")
		})
	}
}

// BenchmarkHerdKeysCluster is BenchmarkHerdKeys on a 3-primary cluster,
// every client a cluster client: lockgen waits with SSUBSCRIBE on the
// shard of each key's slot, and the cluster bus's publish messages are
// counted too.
//
//	go test -v -run '^$' -bench HerdKeysCluster -benchtime 3x
func BenchmarkHerdKeysCluster(b *testing.B) {
	_, nodes := startBenchCluster(b)
	for _, keys := range []int{1000, 10000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			benchKeys(b, clusterTarget(b, nodes), keys, "cluster ")
		})
	}
}

// benchKeys runs and reports BenchmarkHerdKeys' rounds on target, what
// prefixing its log lines.
func benchKeys(b *testing.B, target procTarget, keys int, what string) {
	shape := keysShape{clients: 8, lockers: 16, keys: keys, perLocker: 40, hold: time.Millisecond}
	names, lockers := keysLibs(b, shape, target)
	runs := make([][]keysResult, len(names))
	rotatedRounds(b, len(names), func(i, round int) {
		runs[i] = append(runs[i], runKeys(b, target, shape, lockers[i], fmt.Sprintf("%sk%d-%s-%d", strings.TrimSpace(what), keys, names[i], round)))
	})
	for i, name := range names {
		med := func(f func(keysResult) float64) float64 {
			var xs []float64
			for _, r := range runs[i] {
				xs = append(xs, f(r))
			}
			return median(xs)
		}
		all := med(func(r keysResult) float64 { return r.perAcq["all"] })
		evalsha := med(func(r keysResult) float64 { return r.perAcq["evalsha"] })
		subs := med(keysResult.subscribes)
		pub := med(func(r keysResult) float64 { return r.perAcq["publish"] + r.perAcq["spublish"] })
		bus := med(func(r keysResult) float64 { return r.perAcq[busPublish] })
		p50 := med(func(r keysResult) float64 { return float64(r.waitP50) / float64(time.Microsecond) })
		p99 := med(func(r keysResult) float64 { return float64(r.waitP99) / float64(time.Microsecond) })
		ch := med(func(r keysResult) float64 { return float64(r.peakChannels) })
		gor := med(func(r keysResult) float64 { return float64(r.peakGor) })
		cpu := med(func(r keysResult) float64 { return float64(r.redisCPU) / float64(time.Microsecond) })
		ccpu := med(func(r keysResult) float64 { return float64(r.clientCPU) / float64(time.Microsecond) })
		b.ReportMetric(all, name+"-cmds/acq")
		b.ReportMetric(evalsha, name+"-evalsha/acq")
		b.ReportMetric(subs, name+"-subscribes/acq")
		b.ReportMetric(p99, name+"-lock-p99-µs")
		b.ReportMetric(ch, name+"-peak-channels")
		b.ReportMetric(cpu, name+"-redis-cpu-µs/acq")
		b.ReportMetric(ccpu, name+"-client-cpu-µs/acq")
		b.Logf("%skeys=%d %-9s cmds/acq %6.2f  evalsha/acq %5.2f  (un)subscribes/acq %.3f  publish/acq %.3f  bus publish/acq %.3f  CPU µs/acq Redis %5.1f clients %5.1f  Lock p50 %6.0fµs p99 %7.0fµs  peak channels %4.0f  peak goroutines %5.0f  (median of %d, %d acquisitions each)",
			what, keys, name, all, evalsha, subs, pub, bus, cpu, ccpu, p50, p99, ch, gor, len(runs[i]), runs[i][0].acquisitions)
	}
}

// TestHerdKeysCounts is BenchmarkHerdKeys' shape, smaller, for lockgen
// alone, with its counts asserted: over 1 000 keys, 4 clients x 16
// goroutines, lockgen makes at most 2.5 EVALSHA per acquisition, and
// every channel is unsubscribed within drainWait of the last unlock: waiting on
// many keys leaves no subscription behind. On one node (classic pub/sub)
// a client's waiters share one wake-up channel per namespace, so at most
// 4 channels are subscribed at once and at most 0.05 (un)subscribes run
// per acquisition (with a channel per object it was 60-76 and 0.08-0.15).
func TestHerdKeysCounts(t *testing.T) {
	flush(t)
	res := keysCounts(t, singleTarget(t))
	if p := res.perAcq["publish"]; p == 0 {
		t.Error("no PUBLISH: no wait was woken, the run shows nothing about waiting")
	}
	if res.peakChannels > 4 {
		t.Errorf("%d channels subscribed at once, want at most one per client (4)", res.peakChannels)
	}
	if subs := res.subscribes(); subs > 0.05 {
		t.Errorf("%.3f (un)subscribes per acquisition, want at most 0.05", subs)
	}
}

// TestHerdKeysClusterCounts is TestHerdKeysCounts on a 3-primary cluster,
// the keys' slots on every shard (each shard ran SPUBLISH): every
// wake-up is an SPUBLISH (no
// classic PUBLISH, no cluster-bus publish message), on a channel per
// object (SPUBLISH from a script stays in its keys' slot), at most 0.5
// (un)subscribes per acquisition (a wait subscribes its key's channel
// once per client, dropped 30 s after its last waiter).
func TestHerdKeysClusterCounts(t *testing.T) {
	t.Parallel() // a cluster of its own; its drain waits the hub's linger
	_, nodes := startBenchCluster(t)
	res := keysCounts(t, clusterTarget(t, nodes))
	if p := res.perAcq["spublish"]; p == 0 {
		t.Error("no SPUBLISH: no wait was woken, the run shows nothing about waiting")
	}
	if p := res.perAcq["publish"]; p != 0 {
		t.Errorf("%.3f classic PUBLISH per acquisition, want 0", p)
	}
	if p := res.perAcq[busPublish]; p != 0 {
		t.Errorf("%.3f cluster-bus publish messages per acquisition, want 0", p)
	}
	if subs := res.subscribes(); subs > 0.5 {
		t.Errorf("%.3f (un)subscribes per acquisition, want at most 0.5", subs)
	}
	for i, n := range nodes { // the cluster is the test's own: its counts are this run's
		if c := nodesStats(t, []*redis.Client{n})["spublish"]; c == 0 {
			t.Errorf("node %d ran no SPUBLISH: the keys' wake-ups did not reach every shard", i)
		}
	}
}

// keysCounts runs TestHerdKeysCounts' shape for lockgen on target and
// checks the bounds both tests share.
func keysCounts(t *testing.T, target procTarget) keysResult {
	shape := keysShape{clients: 4, lockers: 16, keys: 1000, perLocker: 25, hold: time.Millisecond}
	lockers := keysLockgen(t, shape, target)
	waitDrained(target) // earlier tests' clients keep channels 30 s after their last waiter
	res := runKeys(t, target, shape, lockers, "tk")
	names := slices.SortedFunc(maps.Keys(res.perAcq), func(a, b string) int { return cmp.Compare(res.perAcq[b], res.perAcq[a]) })
	var per []string
	for _, name := range names {
		per = append(per, fmt.Sprintf("%s %.3f", name, res.perAcq[name]))
	}
	t.Logf("%d acquisitions; peak channels %d; per acquisition: %s", res.acquisitions, res.peakChannels, strings.Join(per, ", "))
	if res.acquisitions != shape.clients*shape.lockers*shape.perLocker {
		t.Errorf("%d acquisitions, want %d", res.acquisitions, shape.clients*shape.lockers*shape.perLocker)
	}
	if e := res.perAcq["evalsha"]; e > 2.5 {
		t.Errorf("%.2f EVALSHA per acquisition, want at most 2.5", e)
	}
	if !res.drained {
		t.Errorf("channels still subscribed %v after the last unlock", drainWait)
	}
	return res
}
