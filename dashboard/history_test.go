package dashboard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/dashboard"
	"github.com/lockgen/lockgen/examples/ops/shopops"
	lockrt "github.com/lockgen/lockgen/runtime"
)

// series returns the values of a history's series, by chart id and name.
func seriesOf(h dashboard.History, chart, name string) []*float64 {
	for _, c := range h.Charts {
		if c.ID != chart {
			continue
		}
		for _, s := range c.Series {
			if s.Name == name {
				return s.Values
			}
		}
	}
	return nil
}

// lastValues sums a series' values over the last two minutes (a test
// may straddle a minute's end), and tells whether any was present.
func lastValues(v []*float64) (sum float64, present bool) {
	if len(v) < 2 {
		return 0, false
	}
	for _, x := range v[len(v)-2:] {
		if x != nil {
			sum += *x
			present = true
		}
	}
	return sum, present
}

// TestHistory: what a client with WithStats does to the demo's objects
// (locks, a limiter's denials, a queue's deliveries, acks and nacks)
// shows in /api/history after its flush, each in its object's charts,
// with the means of the durations; a snapshot samples the queue's depth
// by state into the state chart, once a minute.
func TestHistory(t *testing.T) {
	srv, rdb := setup(t, dashboard.Options{})
	ctx := context.Background()
	rt := lockrt.New(rdb, lockrt.WithID("svc"), lockrt.WithStats("ops"))
	defer rt.Close()

	locks := shopops.NewLocks(rt)
	for range 3 {
		le, err := locks.Order(7).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	api := shopops.NewLimiters(rt).API("u-9")
	for range 25 { // burst 20: the last 5 are denied
		if _, err := api.Allow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	email := shopops.NewQueues(rt).Email("hist")
	for _, to := range []string{"a@x", "b@x", "c@x"} {
		if _, err := email.Offer(ctx, to); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		d, err := email.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			err = d.Ack(ctx)
		} else {
			err = d.Nack(ctx, errors.New("try later"))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.FlushStats(ctx); err != nil {
		t.Fatal(err)
	}

	history := func(object string) dashboard.History {
		t.Helper()
		var h dashboard.History
		if r := get(t, srv.URL+"/api/history/"+object, &h); r.StatusCode != 200 {
			t.Fatalf("history of %s: %s", object, r.Status)
		}
		if len(h.Minutes) != 61 || h.Minutes[60] != time.Now().Unix()/60*60 && h.Minutes[60] != time.Now().Unix()/60*60-60 {
			t.Fatalf("%s's minutes: %d, the last %v", object, len(h.Minutes), h.Minutes[len(h.Minutes)-1])
		}
		return h
	}
	for _, c := range []struct {
		object, chart, name string
		want                float64
	}{
		{"Order", "events", "acquired", 3},
		{"Order", "events", "released", 3},
		{"Email", "events", "enqueued", 3},
		{"Email", "events", "delivered", 2},
		{"Email", "events", "processed (acked)", 1},
		{"Email", "events", "failed (nacked)", 1},
	} {
		got, _ := lastValues(seriesOf(history(c.object), c.chart, c.name))
		if got != c.want {
			t.Errorf("%s's %s %q over the last minutes: %v, want %v", c.object, c.chart, c.name, got, c.want)
		}
	}
	// Burst 20 at 100/min: 20 allowed at once, and one more every 600ms.
	allowed, _ := lastValues(seriesOf(history("API"), "events", "allowed"))
	denied, _ := lastValues(seriesOf(history("API"), "events", "rejected (denied)"))
	if allowed+denied != 25 || denied < 1 {
		t.Errorf("API's requests: %v allowed, %v denied; want 25 in all, some denied", allowed, denied)
	}
	h := history("Order")
	if !h.Counted {
		t.Error("Order's history says nothing was counted")
	}
	if wait, ok := lastValues(seriesOf(h, "durations", "hold (released)")); !ok || wait <= 0 {
		t.Errorf("Order's mean hold: %v (present %v)", wait, ok)
	}
	if v := seriesOf(h, "events", "acquired"); v[0] == nil || *v[0] != 0 {
		t.Errorf("an hour ago Order's acquired is %v, want 0 (a count with nothing counted)", v[0])
	}

	// The state chart: sampled by the snapshot the page asks for.
	if _, ok := lastValues(seriesOf(history("Email"), "state", "ready")); ok {
		t.Fatal("a depth sample before any snapshot")
	}
	get(t, srv.URL+"/api/snapshot", nil)
	e := history("Email")
	// The demo's Email("acme") (2 ready, 1 delayed, 1 in flight, 1 dead)
	// and this test's Email("hist") (1 ready, 1 nacked: ready again or
	// delayed by its backoff).
	for name, want := range map[string]float64{"ready": 3, "delayed": 1, "in flight": 1, "dead": 1} {
		got, ok := lastValues(seriesOf(e, "state", name))
		if !ok || got < want || got > want+1 {
			t.Errorf("Email's sampled %s: %v (present %v), want %v or %v", name, got, ok, want, want+1)
		}
	}
	if v, _ := lastValues(seriesOf(history("Order"), "state", "locks held")); v != 1 {
		t.Errorf("Order's sampled locks held: %v, want 1 (the demo's Order(42))", v)
	}

	if r := get(t, srv.URL+"/api/history/Nope", nil); r.StatusCode != 404 {
		t.Errorf("the history of an unknown object: %s", r.Status)
	}
}

// hsetCounter counts the HSETs sent through a client.
type hsetCounter struct{ n atomic.Int64 }

func (h *hsetCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *hsetCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hset" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *hsetCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "hset" {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// TestHistorySampledOncePerMinute: the page's snapshots (every 2 s)
// write one sample a minute, not one each.
func TestHistorySampledOncePerMinute(t *testing.T) {
	srv, rdb := setup(t, dashboard.Options{})
	var h hsetCounter
	rdb.(*redis.Client).AddHook(&h)
	start := time.Now().Unix() / 60
	for range 5 {
		get(t, srv.URL+"/api/snapshot", nil)
	}
	minutes := time.Now().Unix()/60 - start + 1 // 2 when the snapshots straddled a minute's end
	if n := h.n.Load(); n < 1 || n > minutes {
		t.Errorf("5 snapshots in %d minute(s) wrote %d samples", minutes, n)
	}
}
