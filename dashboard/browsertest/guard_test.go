package browsertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lockgen/lockgen/dashboard"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// requests records the requests a handler answered, with their status.
type requests struct {
	mu  sync.Mutex
	log []string // "POST /api/action evil.test:1234 403"
}

func (q *requests) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(sw, r)
		q.mu.Lock()
		q.log = append(q.log, fmt.Sprintf("%s %s %s %d", r.Method, r.URL.Path, r.Host, sw.status))
		q.mu.Unlock()
	})
}

// matching returns the requests recorded whose line starts with prefix.
func (q *requests) matching(prefix string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, l := range q.log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// waitReload is waitFor across a reload of the page: the page reloads
// itself once it has a token, which ends a poll under way.
func waitReload(js string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := waitFor(js)(ctx, t)
			// A reload under way answers "target navigated" or "cannot
			// find context" (-32000); its expression must hold on a page
			// not parsed yet (no body, no elements: optional chaining),
			// where a TypeError would end the wait (it did, once).
			if err == nil || time.Now().After(deadline) || !strings.Contains(err.Error(), "(-32000)") {
				return chromedp.Void{}, err
			}
		}
	}
}

// submit sets an input's value and submits its form (which reloads the
// page) just after the call returns.
func submit(input, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; setTimeout(() => e.form.requestSubmit(), 10); return true })()`, input, value))
}

// TestTokenInChromium opens a dashboard that needs a token: the page asks
// for it, says so when a wrong one is given, works with the right one
// (force-unlock from its button sends it), and takes it from the
// address' fragment, which it then drops from the address bar.
func TestTokenInChromium(t *testing.T) {
	ctx := context.Background()
	const token = "browser+test/token=0123456789" // a base64 token's characters
	rdb, srv := demoDashboardWith(t, dashboard.Options{Refresh: 300 * time.Millisecond, Token: token}, nil)

	b := browser(t)
	err := chromedp.Do(b,
		chromedp.Navigate(srv.URL+"/"),
		waitFor(`!document.querySelector("#login").hidden && document.querySelector("#login-wrong").hidden`),
		waitFor(`document.body.dataset.loaded !== "true" && document.querySelectorAll('#objects tbody tr').length === 0`),
	)
	if err != nil {
		t.Fatalf("the page does not ask for the token: %v", err)
	}
	screenshot(t, b, "dashboard-token-asked.png")

	err = chromedp.Do(b,
		submit("#login-token", "not-the-token-at-all"),
		waitReload(`document.querySelector("#login")?.hidden === false && document.querySelector("#login-wrong")?.hidden === false`),
	)
	if err != nil {
		t.Fatalf("a wrong token: %v", err)
	}
	screenshot(t, b, "dashboard-token-refused.png")

	err = chromedp.Do(b,
		submit("#login-token", token),
		waitReload(`document.body?.dataset.loaded === "true"`),
		waitFor(`document.querySelector("#login").hidden`),
		waitFor(cellIs("Order", "1 held")),
		click(`tr[data-object="Order"]`),
		waitFor(`!!document.querySelector('tr[data-key="ops:{Order:order:42}"] button[data-action="force-unlock"]')`),
		click(`tr[data-key="ops:{Order:order:42}"] button[data-action="force-unlock"]`),
		waitFor(`!document.querySelector("#confirm").hidden`),
		click("#confirm-yes"),
		waitFor(cellIs("Order", "0 held")),
	)
	if err != nil {
		t.Fatalf("the page with the right token: %v", err)
	}
	if n := rdb.Exists(ctx, "ops:{Order:order:42}").Val(); n != 0 {
		t.Fatal("the page says free but the lock's key is still in Redis")
	}

	// A fresh tab state: the token in the fragment, next to the object to
	// show.
	err = chromedp.Do(b,
		chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`),
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(srv.URL+"/#Email&token="+token),
		waitReload(`document.body?.dataset.loaded === "true"`),
		waitFor(`document.querySelector("#detail-title").textContent.startsWith("Email")`),
		waitFor(`location.hash === "#Email" && !location.href.includes("token")`),
	)
	if err != nil {
		t.Fatalf("the token in the fragment: %v", err)
	}
	screenshot(t, b, "dashboard-token-fragment.png")
}

// TestForeignPagesInChromium: a page of another site (evil.test, mapped
// to 127.0.0.1 in the browser) posts a force-unlock to the dashboard with
// a no-cors fetch and with a text/plain form (the JSON CSRF trick): both
// are refused with 403 and the lock stays held. Then the browser opens
// the dashboard by a name that resolves to loopback (rebind.test: DNS
// rebinding), and the page and the API are refused.
func TestForeignPagesInChromium(t *testing.T) {
	ctx := context.Background()
	var seen requests
	rdb, srv := demoDashboardWith(t, dashboard.Options{Refresh: 300 * time.Millisecond}, seen.wrap)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	target := "http://localhost:" + port

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><body><h1>an unrelated site</h1>
<iframe name="sink"></iframe>
<form id="f" method="POST" action="%[1]s/api/action" enctype="text/plain" target="sink">
<input type="hidden" name='{"action":"force-unlock","object":"Order","params":["42"],"x":"' value='"}'>
</form>
<script>
fetch("%[1]s/api/action", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
  body: JSON.stringify({action: "force-unlock", object: "Order", params: ["42"]})})
  .finally(() => { document.body.dataset.fetched = "true"; document.getElementById("f").submit(); });
</script></body></html>`, target)
	}))
	defer evil.Close()
	_, evilPort, _ := net.SplitHostPort(strings.TrimPrefix(evil.URL, "http://"))

	b := browser(t, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1"))
	err := chromedp.Do(b,
		chromedp.Navigate("http://evil.test:"+evilPort+"/"),
		waitFor(`document.body.dataset.fetched === "true"`),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The server's log: the form's POST is not observable from the page.
	redistest.Within(20*time.Second, func() bool { return len(seen.matching("POST /api/action")) >= 2 })
	posts := seen.matching("POST /api/action")
	if len(posts) != 2 {
		t.Fatalf("the dashboard saw %d actions, want 2 (the fetch and the form): %v", len(posts), posts)
	}
	for _, p := range posts {
		if !strings.HasSuffix(p, " 403") {
			t.Errorf("a cross-site action was answered: %s", p)
		}
	}
	if n := rdb.Exists(ctx, "ops:{Order:order:42}").Val(); n != 1 {
		t.Fatal("a cross-site page released the lock")
	}
	screenshot(t, b, "dashboard-cross-site-page.png")

	rebound := "http://rebind.test:" + port
	var text string
	err = chromedp.Do(b,
		chromedp.Navigate(rebound+"/"),
		waitFor(`document.body.innerText.includes("is not allowed")`),
	)
	if err != nil {
		t.Fatalf("the dashboard by a rebound name: %v", err)
	}
	screenshot(t, b, "dashboard-rebound-host.png")
	text, err = chromedp.Run(b, chromedp.Evaluate[string](`fetch("/api/snapshot").then((r) => r.status + " " + r.statusText)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "403") {
		t.Errorf("the API by a rebound name: %s", text)
	}
	for _, l := range seen.matching("GET") {
		if strings.Contains(l, "rebind.test") && !strings.HasSuffix(l, " 403") {
			t.Errorf("answered by a rebound name: %s", l)
		}
	}
	// The same browser opens it by its loopback name.
	if err := chromedp.Do(b, chromedp.Navigate(target+"/"), waitFor(cellIs("Order", "1 held"))); err != nil {
		t.Fatalf("the dashboard by localhost: %v", err)
	}
}
