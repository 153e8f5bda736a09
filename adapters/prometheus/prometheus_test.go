package prometheus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	lockprom "github.com/lockgen/lockgen/adapters/prometheus"
	"github.com/lockgen/lockgen/examples/ops/shopops"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestMetrics drives the generated objects of examples/ops over a real
// Redis with the adapter installed, and reads the metrics back with
// prometheus' testutil.
func TestMetrics(t *testing.T) {
	rdb := redistest.Single(t).Client()
	reg := prometheus.NewPedanticRegistry()
	obs := lockprom.New(reg)
	rt := lockrt.New(rdb, lockrt.WithObserver(obs))
	defer rt.Close()
	ctx := context.Background()
	if err := shopops.Preload(ctx, rt); err != nil { // so only SCRIPT FLUSH below causes reloads
		t.Fatal(err)
	}

	locks := shopops.NewLocks(rt)
	for i := range 3 {
		le, err := locks.Order(int64(i)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := shopops.NewLocks(lockrt.New(rdb)).Order(9).Lock(ctx); err != nil { // held elsewhere
		t.Fatal(err)
	}
	if _, err := locks.Order(9).TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	p, err := shopops.NewSemaphores(rt).Export("acme").Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(ctx)
	api := shopops.NewLimiters(rt).API("u")
	for range 22 { // burst 20: 21 at once
		if _, err := api.Allow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	email := shopops.NewQueues(rt).Email("acme")
	if _, err := email.Offer(ctx, "gone@example.com"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		d, err := email.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d.Nack(ctx, errors.New("550"))
	}
	if _, err := email.OfferMany(ctx, "a@example.com", "b@example.com"); err != nil {
		t.Fatal(err)
	}
	d, err := email.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.Ack(ctx)
	rdb.ScriptFlush(ctx)
	if le, err := locks.Order(1).Lock(ctx); err == nil {
		le.Unlock(ctx)
	}

	// Each collector's one series per label set, and the values.
	expected := `
# HELP lockgen_operations_total Observed lockgen operations (Lock, Acquire, Allow, Offer, Take, Process), by outcome.
# TYPE lockgen_operations_total counter
lockgen_operations_total{object="API",op="Allow",result="ok"} 22
lockgen_operations_total{object="Email",op="Offer",result="ok"} 2
lockgen_operations_total{object="Email",op="Take",result="ok"} 3
lockgen_operations_total{object="Export",op="Acquire",result="ok"} 1
lockgen_operations_total{object="Order",op="Lock",result="error"} 1
lockgen_operations_total{object="Order",op="Lock",result="ok"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "lockgen_operations_total"); err != nil {
		t.Error(err)
	}
	expected = `
# HELP lockgen_queue_items_total Queue items, by what happened to them.
# TYPE lockgen_queue_items_total counter
lockgen_queue_items_total{event="acked",object="Email"} 1
lockgen_queue_items_total{event="dead",object="Email"} 1
lockgen_queue_items_total{event="delivered",object="Email"} 3
lockgen_queue_items_total{event="enqueued",object="Email"} 3
lockgen_queue_items_total{event="nacked",object="Email"} 1
# HELP lockgen_limiter_requests_total Requests a limiter decided on, by decision.
# TYPE lockgen_limiter_requests_total counter
lockgen_limiter_requests_total{decision="allowed",object="API"} 21
lockgen_limiter_requests_total{decision="denied",object="API"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "lockgen_queue_items_total", "lockgen_limiter_requests_total"); err != nil {
		t.Error(err)
	}
	// Histograms: one observation per acquisition and release.
	if n := testutil.CollectAndCount(reg, "lockgen_acquire_wait_seconds"); n != 2 { // Order, Export
		t.Errorf("lockgen_acquire_wait_seconds has %d series, want 2", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "lockgen_hold_seconds" && mf.GetName() != "lockgen_acquire_wait_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			counts[mf.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	// The lock's two scripts were sent again once each after SCRIPT FLUSH
	// (the queue's delay timer may reload queue_move too, when it runs).
	reloads := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "lockgen_script_reloads_total" {
			for _, m := range mf.GetMetric() {
				reloads[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if reloads["reentrant_acquire"] != 1 || reloads["reentrant_release"] != 1 {
		t.Errorf("script reloads %v, want reentrant_acquire and reentrant_release once", reloads)
	}
	for k, want := range map[string]uint64{
		"lockgen_acquire_wait_seconds/Order": 4, "lockgen_hold_seconds/Order": 4,
		"lockgen_acquire_wait_seconds/Export": 1, "lockgen_hold_seconds/Export": 1,
	} {
		if counts[k] != want {
			t.Errorf("%s has %d observations, want %d", k, counts[k], want)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestLateness: the delay timer's lateness of each delayed item it makes
// ready is a histogram observation labelled by the queue's spec name
// only: two items left due 5s ago (as by a client that died) fall in the
// buckets from 5s up when a client starts the queue, and an item offered
// with a delay adds a third observation. Read back with testutil.
func TestLateness(t *testing.T) {
	rdb := redistest.Single(t).Client()
	reg := prometheus.NewPedanticRegistry()
	rt := lockrt.New(rdb, lockrt.WithObserver(lockprom.New(reg)))
	defer rt.Close()
	ctx := context.Background()

	email := shopops.NewQueues(rt).Email("late")
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"left-1", "left-2"} {
		rdb.ZAdd(ctx, email.Key()+":delayed", redis.Z{Score: float64(now.Add(-5 * time.Second).UnixMilli()), Member: id})
		rdb.HSet(ctx, email.Key()+":data", id, "\x00\x01j\"left@example.com\"")
	}
	if err := email.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := lateness(t, reg)
	if h == nil || h.GetSampleCount() != 2 || h.GetSampleSum() < 10 {
		t.Fatalf("lateness after Start: %v; want 2 observations of at least 5s", h)
	}
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() < 5 && b.GetCumulativeCount() != 0 {
			t.Errorf("%d observations under %gs; want none", b.GetCumulativeCount(), b.GetUpperBound())
		}
	}
	if _, err := email.OfferIn(ctx, "soon@example.com", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		d, err := email.TryTake(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		d.Ack(ctx)
	}
	// The timer reports after its move replied, maybe after the Take.
	for end := time.Now().Add(10 * time.Second); lateness(t, reg).GetSampleCount() < 3 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if h := lateness(t, reg); h.GetSampleCount() != 3 {
		t.Errorf("lateness after a delayed offer: %d observations, want 3", h.GetSampleCount())
	}
	if n := testutil.CollectAndCount(reg, "lockgen_delivery_lateness_seconds"); n != 1 {
		t.Errorf("lockgen_delivery_lateness_seconds has %d series, want 1 (the object's, whatever its params)", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// lateness returns the Email queue's lateness histogram.
func lateness(t *testing.T, reg prometheus.Gatherer) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "lockgen_delivery_lateness_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetName() == "object" && m.GetLabel()[0].GetValue() == "Email" {
				return m.GetHistogram()
			}
		}
	}
	return nil
}
