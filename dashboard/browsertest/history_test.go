package browsertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/examples/ops/shopops"
	lockrt "github.com/lockgen/lockgen/runtime"
)

// seedHour writes an hour of made-up history for the demo's objects, as
// the runtimes of a few services with WithStats and a dashboard's samples
// would have: counts with a daily-looking wave, and a queue that backs up
// and drains.
func seedHour(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	for m := 60; m >= 2; m-- { // the last two minutes are the live client's
		at := now.Add(-time.Duration(m) * time.Minute)
		wave := 1 + math.Sin(float64(m)/9)
		key := lockrt.StatsKey("ops", at)
		fields := map[string]int64{
			"Order:acquired": int64(40 * wave), "Order:acquired.us": int64(40 * wave * 2000 * wave),
			"Order:released": int64(40 * wave), "Order:released.us": int64(40 * wave * 15000),
			"API:allowed": int64(90 * wave), "API:denied": int64(10 * wave * wave),
			"Email:enqueued": int64(30 * wave), "Email:delivered": int64(28 * wave),
			"Email:acked": int64(25 * wave), "Email:nacked": int64(3 * wave), "Email:dead": int64(m % 7 / 6),
			"Email:due": 4, "Email:due.us": int64(4 * 1000 * (20 + 30*wave)),
		}
		args := []any{}
		for f, v := range fields {
			args = append(args, f, v)
		}
		if err := rdb.HSet(ctx, key, args...).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.Expire(ctx, key, lockrt.StatsTTL)
		if m%17 == 0 {
			continue // a minute no dashboard sampled
		}
		backlog := int64(20 * (1 + math.Sin(float64(m)/6)))
		err := lockrt.WriteStatsGauges(ctx, rdb, "ops", at, map[string]map[string]int64{
			"Email": {"queue_items.ready": backlog, "queue_items.delayed": 1, "queue_items.in_flight": 2, "queue_items.dead": 1},
			"Order": {"locks_held": int64(2 * wave), "waiters": int64(wave)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestHistoryInChromium opens the demo's objects with an hour of history
// behind them (seeded) and the current minute counted by a real client
// with WithStats: the queue shows its depth by state, its processed and
// failed items per minute and its delivery lateness, the lock its holds
// and waits, the limiter its rejections, each drawn by uPlot.
func TestHistoryInChromium(t *testing.T) {
	ctx := context.Background()
	rdb, srv := demoDashboard(t)
	seedHour(t, rdb)

	rt := lockrt.New(rdb, lockrt.WithID("svc"), lockrt.WithStats("ops"))
	defer rt.Close()
	email := shopops.NewQueues(rt).Email("live")
	for range 3 {
		if _, err := email.Offer(ctx, "x@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		d, err := email.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			err = d.Ack(ctx)
		} else {
			err = d.Nack(ctx, errors.New("later"))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	api := shopops.NewLimiters(rt).API("live")
	for range 30 {
		if _, err := api.Allow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.FlushStats(ctx); err != nil {
		t.Fatal(err)
	}

	// chartHas: the chart is drawn (a canvas with a size) and its legend
	// names the series.
	chartHas := func(chart string, series ...string) chromedp.Action[chromedp.Void] {
		js := fmt.Sprintf(`(() => { const c = document.querySelector('#charts .chart[data-chart=%q]'); if (!c) return false;
			const cv = c.querySelector("canvas"); if (!cv || cv.width === 0) return false;
			const legend = c.querySelector(".u-legend"); if (!legend) return false;`, chart)
		for _, s := range series {
			js += fmt.Sprintf(` if (!legend.textContent.includes(%q)) return false;`, s)
		}
		return waitFor(js + ` return true })()`)
	}
	// valueIs: the chart's last value of a series (what: "last"), or its
	// sum over the last two minutes ("recent": the live counts, whether
	// or not a minute ended since), as the page got it.
	valueIs := func(what, chart, series string, want float64) chromedp.Action[chromedp.Void] {
		return waitFor(fmt.Sprintf(`(() => { const c = document.querySelector('#charts .chart[data-chart=%q]'); return !!c && JSON.parse(c.dataset[%q])[%q] === %v })()`, chart, what, series, want))
	}
	b := browser(t)
	err := chromedp.Do(b,
		chromedp.Navigate(srv.URL+"/#Email"),
		waitFor(`document.body.dataset.loaded === "true"`),
		waitFor(`document.querySelector("#history-title").textContent.startsWith("Email")`),
		chartHas("state", "ready", "delayed", "in flight", "dead"),
		chartHas("events", "enqueued", "delivered", "processed (acked)", "failed (nacked)", "dead-lettered"),
		chartHas("durations", "delivery lateness (due)"),
		// The live client's 2 acks and 1 nack, and the depth the page's
		// snapshot sampled: the demo's 1 in flight.
		valueIs("recent", "events", "processed (acked)", 2),
		valueIs("recent", "events", "failed (nacked)", 1),
		valueIs("last", "state", "in flight", 1),
		waitFor(`document.querySelectorAll("#charts .chart").length === 3 && document.querySelector("#history-note").hidden`),
	)
	if err != nil {
		t.Fatalf("the queue's history: %v", err)
	}
	screenshot(t, b, "dashboard-history-queue.png")

	err = chromedp.Do(b,
		click(`tr[data-object="Order"]`),
		waitFor(`document.querySelector("#charts").dataset.object === "Order"`),
		chartHas("state", "locks held", "waiters"),
		chartHas("events", "acquired", "released"),
		chartHas("durations", "wait (acquired)", "hold (released)"),
	)
	if err != nil {
		t.Fatalf("the lock's history: %v", err)
	}
	screenshot(t, b, "dashboard-history-lock.png")

	err = chromedp.Do(b,
		click(`tr[data-object="API"]`),
		waitFor(`document.querySelector("#charts").dataset.object === "API"`),
		chartHas("events", "allowed", "rejected (denied)"),
		waitFor(`(() => { const l = JSON.parse(document.querySelector('#charts .chart[data-chart="events"]').dataset.recent); return l["allowed"] + l["rejected (denied)"] === 30 })()`),
	)
	if err != nil {
		t.Fatalf("the limiter's history: %v", err)
	}
	screenshot(t, b, "dashboard-history-limiter.png")

	// An object nothing counted: the page says how to get its history.
	err = chromedp.Do(b,
		click(`tr[data-object="Warmup"]`),
		waitFor(`document.querySelector("#charts").dataset.object === "Warmup"`),
		waitFor(`!document.querySelector("#history-note").hidden && document.querySelector("#history-note").textContent.includes("runtime.WithStats")`),
	)
	if err != nil {
		t.Fatalf("an object with no history: %v", err)
	}
}
