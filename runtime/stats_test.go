package runtime_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// cmdCounter counts the commands a client sends, and its pipelines, but
// not a new connection's handshake (HELLO, CLIENT SETINFO).
type cmdCounter struct {
	mu        sync.Mutex
	names     []string
	pipelines int
}

func (h *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(false, cmd)
		return next(ctx, cmd)
	}
}
func (h *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(true, cmds...)
		return next(ctx, cmds)
	}
}

func (h *cmdCounter) count(pipeline bool, cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range cmds {
		if name := c.Name(); name != "hello" && name != "client" {
			h.names = append(h.names, name)
			n++
		}
	}
	if pipeline && n > 0 {
		h.pipelines++
	}
}

// reset returns the commands and pipelines counted, and starts again.
func (h *cmdCounter) reset() (names []string, pipelines int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	names, pipelines = h.names, h.pipelines
	h.names, h.pipelines = nil, 0
	return names, pipelines
}

// statsNS returns a namespace of the test's own, and of this run of it
// (go test -count=2 runs it again against the same server).
func statsNS(t *testing.T) string {
	return "st-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// minuteOf reads the minute now falls in of ns's history: object's
// counters.
func minuteOf(t *testing.T, rdb redis.UniversalClient, ns, object string) map[string]int64 {
	t.Helper()
	now := time.Now()
	ms, err := lockrt.ReadStats(context.Background(), rdb, ns, now.Add(-time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	// The counts of a test that straddles a minute boundary are split.
	sum := map[string]int64{}
	for _, m := range ms {
		for k, v := range m.Objects[object] {
			sum[k] += v
		}
	}
	return sum
}

// TestStats: with WithStats an operation sends exactly the commands it
// sends without; FlushStats sends what was counted in one pipeline (an
// HINCRBY per counter and an EXPIRE), and nothing when nothing happened;
// ReadStats reads it back.
func TestStats(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ns := statsNS(t)
		plain := newClient(t, b)
		stats := newClientWith(t, b, lockrt.WithStats(ns))
		var hp, hs cmdCounter
		plain.Redis().AddHook(&hp)
		stats.Redis().AddHook(&hs)
		d := def(t, lockrt.Reentrant, time.Minute, false, time.Second)
		run := func(c *lockrt.Client, k string, n int) {
			for range n {
				le, err := c.Lock(d, k).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := le.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		run(plain, key(t, "plain"), 1) // warm-up: scripts loaded
		run(stats, key(t, "stats"), 1)
		hp.reset()
		hs.reset()
		run(plain, key(t, "plain"), 5)
		run(stats, key(t, "stats"), 5)
		cp, _ := hp.reset()
		cs, _ := hs.reset()
		if strings.Join(cp, " ") != strings.Join(cs, " ") {
			t.Fatalf("5 locks sent\n%v without stats,\n%v with", cp, cs)
		}

		if err := stats.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
		names, pipes := hs.reset()
		// A minute's counters: a test that straddles a minute boundary
		// (the warm-up in one, the five in the next) flushes two minutes'.
		const minute = "hincrby hincrby hincrby hincrby expire"
		if got := strings.Join(names, " "); pipes != 1 || got != minute && got != minute+" "+minute {
			t.Errorf("the flush sent %d pipelines: %v; want 1: 4 hincrby (acquired, released, and their .us) and an expire per minute counted", pipes, names)
		}
		got := minuteOf(t, stats.Redis(), ns, d.Name)
		if got["acquired"] != 6 || got["released"] != 6 || got["acquired.us"] <= 0 || got["released.us"] <= 0 || len(got) != 4 {
			t.Errorf("the minute's counters: %v, want 6 acquired and 6 released, with their durations", got)
		}
		key := lockrt.StatsKey(ns, time.Now())
		if ttl := stats.Redis().TTL(ctx, key).Val(); ttl <= lockrt.StatsTTL-time.Minute || ttl > lockrt.StatsTTL {
			t.Errorf("%s's TTL %v, want about %v", key, ttl, lockrt.StatsTTL)
		}
		hs.reset() // the test's reads
		if err := stats.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
		if names, pipes := hs.reset(); pipes != 0 || len(names) != 0 {
			t.Errorf("a flush with nothing counted sent %v in %d pipelines", names, pipes)
		}
		// A second client adds to the same minute.
		other := newClientWith(t, b, lockrt.WithStats(ns))
		run(other, key+"x", 2)
		other.Close() // flushes
		if got := minuteOf(t, stats.Redis(), ns, d.Name); got["acquired"] != 8 {
			t.Errorf("after another client's 2 locks and its Close: %v, want 8 acquired", got)
		}
	})
}

// TestStatsKeptWhileRedisDown: a flush that cannot reach Redis keeps its
// counts, and the next one sends them with what was counted since.
func TestStatsKeptWhileRedisDown(t *testing.T) {
	node, b := ownNode(t)
	ctx := context.Background()
	ns := statsNS(t)
	c := newClientWith(t, b, lockrt.WithStats(ns))
	d := def(t, lockrt.Reentrant, time.Minute, false, time.Second)
	lock := func() {
		t.Helper()
		le, err := c.Lock(d, key(t)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lock()
	closing := newClientWith(t, b, lockrt.WithStats(ns+"-closing"))
	if le, err := closing.Lock(d, key(t, "closing")).Lock(ctx); err != nil {
		t.Fatal(err)
	} else if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := node.Stop(); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := c.FlushStats(fctx); err == nil {
		t.Fatal("a flush to a stopped Redis returned nil")
	}
	cancel()
	// Close's flush gives up after a second when Redis is down.
	start := time.Now()
	closing.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Close with counts to send and Redis down took %v, want about 1s", took)
	}
	if err := node.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, failAfter, func() bool { return c.Redis().Ping(ctx).Err() == nil }, "Redis is not back")
	lock()
	if err := c.FlushStats(ctx); err != nil {
		t.Fatal(err)
	}
	if got := minuteOf(t, c.Redis(), ns, d.Name); got["acquired"] != 2 || got["released"] != 2 {
		t.Errorf("after the failed flush and another: %v, want 2 acquired, 2 released", got)
	}
}

// TestStatsGauges: samples written by WriteStatsGauges replace the
// minute's earlier ones and read back beside the counters; the keys of
// other minutes are empty minutes.
func TestStatsGauges(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ns := statsNS(t)
		rdb := b.new()
		defer rdb.Close()
		now := time.Now()
		for _, depth := range []int64{5, 3} {
			if err := lockrt.WriteStatsGauges(ctx, rdb, ns, now, map[string]map[string]int64{"Email": {"queue_items.ready": depth, "queue_items.dead": 1}}); err != nil {
				t.Fatal(err)
			}
		}
		ms, err := lockrt.ReadStats(ctx, rdb, ns, now.Add(-59*time.Minute), now)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 60 || !ms[59].Start.Equal(now.Truncate(time.Minute)) {
			t.Fatalf("%d minutes, the last from %v; want 60, the last from %v", len(ms), ms[len(ms)-1].Start, now.Truncate(time.Minute))
		}
		if g := ms[59].Objects["Email"]; g["gauge.queue_items.ready"] != 3 || g["gauge.queue_items.dead"] != 1 {
			t.Errorf("the minute's gauges: %v", g)
		}
		if len(ms[0].Objects) != 0 {
			t.Errorf("an hour ago: %v, want nothing", ms[0].Objects)
		}
	})
}

// TestStatsFlushedByItself: a client flushes its counts on its own, on
// its interval (here 100ms rather than a minute).
func TestStatsFlushedByItself(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		ns := statsNS(t)
		c := newClientWith(t, b, lockrt.WithStatsEvery(ns, 100*time.Millisecond))
		d := def(t, lockrt.Reentrant, time.Minute, false, time.Second)
		for range 2 {
			le, err := c.Lock(d, key(t)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, failAfter, func() bool { return minuteOf(t, c.Redis(), ns, d.Name)["released"] == 2 },
			"the client did not flush its counts on its own")
	})
}
