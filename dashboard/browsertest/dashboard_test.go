package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/dashboard"
	"github.com/lockgen/lockgen/examples/ops/demo"
	"github.com/lockgen/lockgen/examples/ops/shopops"
	"github.com/lockgen/lockgen/inspect"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// artifacts is where the screenshots go: $LOCKGEN_ARTIFACTS, or
// artifacts/ next to this file (ignored by git).
func artifacts(t *testing.T) string {
	dir := os.Getenv("LOCKGEN_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium (Debian's chromium package) and
// returns a chromedp context on a new tab.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if path, err = exec.LookPath("chromium-browser"); err != nil {
			t.Fatal("chromium is not installed: run scripts/install-chromium.sh (make test does)")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests may run as root in containers
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// No timeout on this context: it is the browser's life (chromedp.Run's
	// rule); every wait below has its own.
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	return ctx
}

// waitFor polls the page until the JavaScript expression is true.
func waitFor(js string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))
}

// click clicks the first element matching the CSS selector, in one
// JavaScript call (the page re-renders its tables on every refresh, so a
// node looked up earlier may be gone by the time it is clicked).
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) throw new Error("no " + %q); e.click(); return true })()`, sel, sel))
}

func cellIs(object, text string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-object="%s"] td[data-field="state"]') || {}).textContent === %q`, object, text)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG; below, JPEG
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifacts(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// demoDashboard serves the dashboard of the operator demo's objects,
// populated on a Redis of the test's own, until the test ends.
func demoDashboard(t *testing.T) (*redis.Client, *httptest.Server) {
	t.Helper()
	return demoDashboardWith(t, dashboard.Options{Refresh: 300 * time.Millisecond}, nil)
}

// demoDashboardWith is demoDashboard with opts, and wrap around the
// dashboard's handler when not nil.
func demoDashboardWith(t *testing.T, opts dashboard.Options, wrap func(http.Handler) http.Handler) (*redis.Client, *httptest.Server) {
	t.Helper()
	rdb := redistest.Single(t).Client()
	done, err := demo.Populate(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	in, err := inspect.Load(rdb, "../../examples/ops/shopops/lockgen.yaml", inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	h := dashboard.New(in, opts)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return rdb, srv
}

// TestDashboardInChromium opens the dashboard of the operator demo's
// objects in headless Chromium: held locks and queue depths appear, the
// page refreshes itself when Redis changes, and force-unlock and redrive
// work from their buttons (after the confirmation).
func TestDashboardInChromium(t *testing.T) {
	ctx := context.Background()
	rdb, srv := demoDashboard(t)

	b := browser(t)
	err := chromedp.Do(b,
		chromedp.Navigate(srv.URL+"/"),
		waitFor(`document.body.dataset.loaded === "true"`),
		waitFor(cellIs("Order", "1 held")),
		waitFor(cellIs("Rates", "1 held")),
		waitFor(cellIs("Export", "3/4 permits in use")),
		waitFor(cellIs("Email", "2 ready, 1 delayed, 1 in flight, 1 dead")),
		click(`tr[data-object="Order"]`),
		waitFor(`!!document.querySelector('tr[data-key="ops:{Order:order:42}"] button[data-action="force-unlock"]')`),
	)
	if err != nil {
		t.Fatalf("the dashboard does not show the held objects: %v", err)
	}
	screenshot(t, b, "dashboard-held.png")

	// Force-unlock: asks first, and nothing happens before the answer.
	err = chromedp.Do(b,
		click(`tr[data-key="ops:{Order:order:42}"] button[data-action="force-unlock"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "ops:{Order:order:42}").Val(); n != 1 {
		t.Fatal("the lock was released before the confirmation")
	}
	err = chromedp.Do(b,
		click("#confirm-yes"),
		waitFor(cellIs("Order", "0 held")),
		// The instance has no key left, so it leaves the listing.
		waitFor(`!document.querySelector('tr[data-key="ops:{Order:order:42}"]')`),
	)
	if err != nil {
		t.Fatalf("force-unlock from the page: %v", err)
	}
	if n := rdb.Exists(ctx, "ops:{Order:order:42}").Val(); n != 0 {
		t.Fatal("the page says free but the lock's key is still in Redis")
	}

	// Redrive the dead letter.
	err = chromedp.Do(b,
		click(`tr[data-object="Email"]`),
		waitFor(`!!document.querySelector('tr[data-key="ops:{Email:email:acme}"] button[data-action="redrive"]')`),
		click(`tr[data-key="ops:{Email:email:acme}"] button[data-action="redrive"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
		click("#confirm-yes"),
		waitFor(cellIs("Email", "3 ready, 1 delayed, 1 in flight, 0 dead")),
	)
	if err != nil {
		t.Fatalf("redrive from the page: %v", err)
	}
	if n := rdb.LLen(ctx, "ops:{Email:email:acme}:dead").Val(); n != 0 {
		t.Fatalf("the page says 0 dead but Redis has %d", n)
	}

	// Live refresh: a lock taken elsewhere shows up without a click.
	other := lockrt.New(rdb, lockrt.WithID("elsewhere"))
	defer other.Close()
	if _, err := shopops.NewLocks(other).Order(7).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b, waitFor(cellIs("Order", "1 held"))); err != nil {
		t.Fatalf("the page did not refresh itself: %v", err)
	}
	screenshot(t, b, "dashboard-after-actions.png")
}

// TestQueueItemsInChromium opens the demo's Email("acme") queue in
// headless Chromium: every item shows with the id Redis holds it under,
// and Remove, Run now and Redrive on one item's row (after the
// confirmation) change exactly that item, as read straight from Redis.
func TestQueueItemsInChromium(t *testing.T) {
	ctx := context.Background()
	rdb, srv := demoDashboard(t)

	const key = "ops:{Email:email:acme}"
	ready := rdb.LRange(ctx, key, 0, -1).Val() // bob, cy
	delayed := rdb.ZRange(ctx, key+":delayed", 0, -1).Val()
	inFlight := rdb.ZRange(ctx, key+":inflight", 0, -1).Val()
	dead := rdb.LRange(ctx, key+":dead", 0, -1).Val()
	if len(ready) != 2 || len(delayed) != 1 || len(inFlight) != 1 || len(dead) != 1 {
		t.Fatalf("demo queue: ready %v, delayed %v, in flight %v, dead %v", ready, delayed, inFlight, dead)
	}
	row := func(id string) string {
		return fmt.Sprintf(`tr[data-key=%q] li[data-item=%q]`, key, id)
	}
	// rowIs waits until the item's row has the state and its text has s.
	rowIs := func(id, state, s string) chromedp.Action[chromedp.Void] {
		return waitFor(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.dataset.state === %q && e.textContent.includes(%q) })()`, row(id), state, s))
	}
	gone := func(id string) chromedp.Action[chromedp.Void] {
		return waitFor(fmt.Sprintf(`!document.querySelector(%q)`, row(id)))
	}
	b := browser(t)
	err := chromedp.Do(b,
		chromedp.Navigate(srv.URL+"/#Email"),
		waitFor(`document.body.dataset.loaded === "true"`),
		rowIs(ready[0], "ready", "bob@example.com"),
		rowIs(ready[1], "ready", "cy@example.com"),
		rowIs(delayed[0], "delayed", "due in 59m"),
		rowIs(inFlight[0], "in-flight", "attempt 1"),
		rowIs(dead[0], "dead", "smtp: 550 mailbox unavailable"),
		// The ids show as such, and only the actions that apply are offered.
		waitFor(fmt.Sprintf(`document.querySelector(%q).textContent === "#" + %q`, row(ready[0])+" .item-id", ready[0])),
		waitFor(fmt.Sprintf(`document.querySelectorAll(%q).length === 0`, row(inFlight[0])+" button")),
		waitFor(fmt.Sprintf(`!!document.querySelector(%q) && !document.querySelector(%q)`, row(delayed[0])+` button[data-action="run-item-now"]`, row(ready[0])+` button[data-action="run-item-now"]`)),
	)
	if err != nil {
		t.Logf("the page's instances:\n%s", instances(b))
		t.Fatalf("the page does not show the queue's items by id: %v", err)
	}
	screenshot(t, b, "dashboard-queue-items.png")

	// Remove bob's item: asked first, then exactly that item goes.
	err = chromedp.Do(b,
		click(row(ready[0])+` button[data-action="remove-item"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
		waitFor(fmt.Sprintf(`document.querySelector("#confirm-text").textContent.includes(%q)`, ready[0])),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := rdb.LRange(ctx, key, 0, -1).Val(); len(got) != 2 {
		t.Fatal("the item was removed before the confirmation")
	}
	err = chromedp.Do(b, click("#confirm-yes"), gone(ready[0]), rowIs(ready[1], "ready", "cy@example.com"))
	if err != nil {
		t.Fatalf("remove from the page: %v", err)
	}
	if got := rdb.LRange(ctx, key, 0, -1).Val(); len(got) != 1 || got[0] != ready[1] {
		t.Fatalf("after removing %s the ready list is %v, want only %s", ready[0], got, ready[1])
	}
	if rdb.HExists(ctx, key+":data", ready[0]).Val() || !rdb.HExists(ctx, key+":data", ready[1]).Val() {
		t.Fatal("the removed item's body is left, or the other's is gone")
	}

	// Run the delayed item now, and redrive the dead letter by id: both
	// end up ready, behind cy's.
	err = chromedp.Do(b,
		click(row(delayed[0])+` button[data-action="run-item-now"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
		click("#confirm-yes"),
		rowIs(delayed[0], "ready", "dee@example.com"),
		click(row(dead[0])+` button[data-action="redrive-item"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
		click("#confirm-yes"),
		rowIs(dead[0], "ready", "gone@example.com"),
		waitFor(`document.querySelector('tr[data-object="Email"] td[data-field="state"]').textContent === "3 ready, 0 delayed, 1 in flight, 0 dead"`),
	)
	if err != nil {
		t.Fatalf("run now and redrive from the page: %v", err)
	}
	if got := rdb.LRange(ctx, key, 0, -1).Val(); strings.Join(got, " ") != ready[1]+" "+delayed[0]+" "+dead[0] {
		t.Fatalf("ready list %v, want %s %s %s", got, ready[1], delayed[0], dead[0])
	}
	if n := rdb.ZCard(ctx, key+":delayed").Val() + rdb.LLen(ctx, key+":dead").Val(); n != 0 {
		t.Fatalf("%d items still delayed or dead", n)
	}
	screenshot(t, b, "dashboard-queue-items-after.png")
}

// instances returns the text of the page's instances table, for a failure.
func instances(ctx context.Context) string {
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#instances").innerText`))
	if err != nil {
		return err.Error()
	}
	return s
}

// TestQueueOpsInChromium pauses the demo's Email("acme") queue from its
// Pause button (the instance then says PAUSED and offers Resume, and the
// pause is in Redis), dead-letters one ready item from its Dead-letter
// button, and resumes the queue.
func TestQueueOpsInChromium(t *testing.T) {
	ctx := context.Background()
	rdb, srv := demoDashboard(t)
	const key = "ops:{Email:email:acme}"
	ready := rdb.LRange(ctx, key, 0, -1).Val()
	inst := fmt.Sprintf(`tr[data-key=%q]`, key)
	row := func(id string) string { return fmt.Sprintf(`%s li[data-item=%q]`, inst, id) }
	b := browser(t)
	err := chromedp.Do(b,
		chromedp.Navigate(srv.URL+"/#Email"),
		waitFor(`document.body.dataset.loaded === "true"`),
		waitFor(fmt.Sprintf(`!!document.querySelector(%q)`, inst+` button[data-action="pause"]`)),
		click(inst+` button[data-action="pause"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
		click("#confirm-yes"),
		waitFor(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent.includes("PAUSED")`, inst)),
		waitFor(fmt.Sprintf(`!!document.querySelector(%q)`, inst+` button[data-action="resume"]`)),
		waitFor(cellIs("Email", "2 ready, 1 delayed, 1 in flight, 1 dead, 1 paused")),
	)
	if err != nil {
		t.Logf("the page's instances:\n%s", instances(b))
		t.Fatalf("pause from the page: %v", err)
	}
	if rdb.Exists(ctx, key+":paused").Val() != 1 {
		t.Fatal("the page says paused but Redis has no pause key")
	}
	screenshot(t, b, "dashboard-queue-paused.png")
	err = chromedp.Do(b,
		click(row(ready[0])+` button[data-action="bury-item"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
		click("#confirm-yes"),
		waitFor(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.dataset.state === "dead" })()`, row(ready[0]))),
		click(inst+` button[data-action="resume"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
		click("#confirm-yes"),
		waitFor(fmt.Sprintf(`!!document.querySelector(%q)`, inst+` button[data-action="pause"]`)),
	)
	if err != nil {
		t.Logf("the page's instances:\n%s", instances(b))
		t.Fatalf("dead-letter and resume from the page: %v", err)
	}
	if rdb.Exists(ctx, key+":paused").Val() != 0 || rdb.LPos(ctx, key+":dead", ready[0], redis.LPosArgs{}).Err() != nil {
		t.Fatal("after the page's resume and dead-letter: still paused, or the item is not dead")
	}
	screenshot(t, b, "dashboard-queue-resumed.png")
}
