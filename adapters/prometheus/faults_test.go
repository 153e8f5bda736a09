package prometheus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	lockprom "github.com/lockgen/lockgen/adapters/prometheus"
	"github.com/lockgen/lockgen/examples/ops/shopops"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestFaultMetrics: a pub/sub connection killed under a served queue
// (CLIENT KILL TYPE pubsub on a node of the test's own) counts one lost
// connection and one channel subscribed again; a run of the delay timer
// that fails (the delayed set made a string: WRONGTYPE) counts timer
// retries under the queue's spec name, and the timer recovers once the
// key is fixed: an item offered with a delay reaches the waiting Take. A
// lock whose key vanishes under a waiter without a release (as when its
// holder stopped and the lease ran out) is taken by the waiter's fallback
// timer: one wait fallback for Order.
func TestFaultMetrics(t *testing.T) {
	rdb := redistest.Single(t).Client()
	reg := prometheus.NewPedanticRegistry()
	obs := lockprom.New(reg)
	rt := lockrt.New(rdb, lockrt.WithObserver(obs))
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	email := shopops.NewQueues(rt).Email("acme")
	k := email.Key()
	taken := make(chan string, 1)
	go func() { // a waiting Take keeps the queue's channel subscribed
		d, err := email.TryTake(ctx, 50*time.Second)
		if err != nil {
			taken <- err.Error()
			return
		}
		d.Ack(ctx)
		taken <- d.Value
	}()
	waitUntil := func(what string, f func() bool) {
		t.Helper()
		for end := time.Now().Add(15 * time.Second); !f(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting until %s", what)
			}
		}
	}
	subscribed := func() bool {
		n, err := rdb.PubSubNumSub(ctx, k+":ch").Result()
		return err == nil && n[k+":ch"] == 1
	}
	waitUntil("the queue's channel is subscribed", subscribed)
	if err := rdb.Do(ctx, "client", "kill", "type", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil("the channel is subscribed again", subscribed)
	waitUntil("the resubscription is counted", func() bool {
		return testutil.CollectAndCount(reg, "lockgen_pubsub_resubscribed_total") == 1 && sum(t, reg, "lockgen_pubsub_resubscribed_total") >= 2
	})
	expected := `
# HELP lockgen_pubsub_lost_total Pub/sub connections that failed (an outage, CLIENT KILL, a failover); their channels are subscribed again. server is the cluster node under sharded pub/sub, else empty.
# TYPE lockgen_pubsub_lost_total counter
lockgen_pubsub_lost_total{server=""} 1
# HELP lockgen_pubsub_resubscribed_total Channels subscribed again after their pub/sub connection failed.
# TYPE lockgen_pubsub_resubscribed_total counter
lockgen_pubsub_resubscribed_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "lockgen_pubsub_lost_total", "lockgen_pubsub_resubscribed_total"); err != nil {
		t.Error(err)
	}

	// A failing move: the delayed set is a string; a message on the
	// channel makes the timer run the move.
	if err := rdb.Set(ctx, k+":delayed", "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Publish(ctx, k+":ch", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil("a timer retry is counted", func() bool { return sum(t, reg, "lockgen_timer_retries_total") >= 1 })
	if n := testutil.CollectAndCount(reg, "lockgen_timer_retries_total"); n != 1 {
		t.Errorf("lockgen_timer_retries_total has %d series, want 1 (object=Email)", n)
	}
	if v := labelled(t, reg, "lockgen_timer_retries_total", "object", "Email"); v < 1 {
		t.Errorf("lockgen_timer_retries_total{object=\"Email\"} = %v, want at least 1", v)
	}
	rdb.Del(ctx, k+":delayed")
	if _, err := email.OfferIn(ctx, "late@example.com", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if v := <-taken; v != "late@example.com" {
		t.Errorf("the waiting Take got %q; want the delayed item moved by the recovered timer", v)
	}
	// A holder on another client that never releases; its key is deleted
	// behind the waiter's back, so no release wakes it.
	holder := lockrt.New(rdb)
	defer holder.Close()
	held := shopops.NewLocks(holder).Order(5)
	if _, err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// The waiter: a client of its own (same observer), whose scripts
	// are counted.
	wrdb := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
	defer wrdb.Close()
	scripts := redistest.NewCounter() // (each command counted once answered)
	wrdb.AddHook(scripts)
	waiter := lockrt.New(wrdb, lockrt.WithObserver(obs))
	defer waiter.Close()
	got := make(chan error, 1)
	go func() {
		le, err := shopops.NewLocks(waiter).Order(5).Lock(ctx)
		if err == nil {
			err = le.Unlock(ctx)
		}
		got <- err
	}()
	// Queued, subscribed, and past the look a new client's wait takes
	// once subscribed (a read of the lock and its entry; a second script
	// before): from then on only a wake-up or its timer makes it try
	// again.
	waitUntil("the waiter is queued and subscribed", func() bool {
		chans, err := rdb.PubSubChannels(ctx, "*:"+waiter.ID()).Result() // a waiter's wake-up channel: <prefix>:<clientID>
		looked := scripts.Count("zscore") > 0 || scripts.Scripts() >= 2
		return rdb.Exists(ctx, held.Key()+":queue").Val() == 1 && err == nil && len(chans) > 0 && looked
	})
	rdb.Del(ctx, held.Key())
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if v := labelled(t, reg, "lockgen_wait_fallbacks_total", "object", "Order"); v != 1 {
		t.Errorf("lockgen_wait_fallbacks_total{object=\"Order\"} = %v, want 1", v)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// sum returns the sum of the counter name's series in reg.
func sum(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// labelled returns the counter name's value whose label is value.
func labelled(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
