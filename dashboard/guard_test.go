package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lockgen/lockgen/dashboard"
)

// do sends one request to the dashboard with the given Host (none: the
// server's address) and headers, and returns its status.
func do(t *testing.T, method, url, host, body string, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

const forceUnlock = `{"action":"force-unlock","object":"Order","params":["42"]}`

// TestHostCheck: a Host header naming anything but an IP, localhost or an
// allowed name is refused with 403 on every route (DNS rebinding: a page
// on evil.example rebinding its name to 127.0.0.1 sends Host
// evil.example), and an action sent so changes nothing.
func TestHostCheck(t *testing.T) {
	srv, rdb := setup(t, dashboard.Options{AllowedHosts: []string{"dash.example.com", ".corp.example", "Upper.Example."}})
	for host, want := range map[string]int{
		"evil.example":          403,
		"evil.example:80":       403,
		"dash.example.com.evil": 403,
		"corp.example":          403, // ".corp.example" is names under it
		"localhost.evil":        403,
		"":                      200, // the server's own address (an IP)
		"127.0.0.1:1234":        200,
		"[::1]:8080":            200,
		"10.1.2.3":              200,
		"localhost:8080":        200,
		"LocalHost":             200,
		"app.localhost":         200,
		"dash.example.com:8080": 200,
		"a.corp.example":        200,
		"upper.example":         200,
	} {
		for _, path := range []string{"/", "/api/snapshot", "/metrics", "/static/app.js"} {
			if got := do(t, "GET", srv.URL+path, host, ""); got != want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, got, want)
			}
		}
	}
	if got := do(t, "POST", srv.URL+"/api/action", "evil.example", forceUnlock); got != 403 {
		t.Errorf("an action with Host evil.example: %d, want 403", got)
	}
	if n := rdb.Exists(t.Context(), "ops:{Order:order:42}").Val(); n != 1 {
		t.Fatal("an action with an unknown Host released the lock")
	}

	srv, _ = setup(t, dashboard.Options{AllowedHosts: []string{"*"}})
	if got := do(t, "GET", srv.URL+"/api/snapshot", "anything.example", ""); got != 200 {
		t.Errorf(`AllowedHosts "*": %d, want 200`, got)
	}
}

// TestCrossOrigin: an action a page of another origin sends (a fetch or
// a form, whatever its content type) is refused with 403 and changes
// nothing; the same action from the page's own origin, or from a client
// that is not a browser (no Sec-Fetch-Site, no Origin), is done.
func TestCrossOrigin(t *testing.T) {
	srv, rdb := setup(t, dashboard.Options{})
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://evil.example"},
		{"Origin", "http://localhost:1"}, // another port: another origin
		{"Sec-Fetch-Site", "cross-site", "Origin", "null"},
	} {
		if got := do(t, "POST", srv.URL+"/api/action", "", forceUnlock, h...); got != 403 {
			t.Errorf("an action with %v: %d, want 403", h, got)
		}
	}
	if n := rdb.Exists(t.Context(), "ops:{Order:order:42}").Val(); n != 1 {
		t.Fatal("a cross-origin action released the lock")
	}
	// Reads are not state-changing: another origin's GET passes the guard
	// (the browser keeps the answer from the page, no CORS header is set).
	if got := do(t, "GET", srv.URL+"/api/snapshot", "", "", "Sec-Fetch-Site", "cross-site"); got != 200 {
		t.Errorf("a cross-site GET: %d", got)
	}
	if got := do(t, "POST", srv.URL+"/api/action", "", forceUnlock, "Sec-Fetch-Site", "same-origin", "Origin", srv.URL); got != 200 {
		t.Fatalf("a same-origin action: %d, want 200", got)
	}
	if n := rdb.Exists(t.Context(), "ops:{Order:order:42}").Val(); n != 0 {
		t.Fatal("the same-origin force-unlock did not release the lock")
	}
}

// TestToken: with a token, every API route and /metrics answer 401
// without it or with another (and an action does nothing); the page and
// its static files load without it, for the page to ask for it.
func TestToken(t *testing.T) {
	const token = "s3cret-token-of-the-test"
	srv, rdb := setup(t, dashboard.Options{Token: token})
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, token} {
		var h []string
		if auth != "" {
			h = []string{"Authorization", auth}
		}
		for _, path := range []string{"/api/config", "/api/snapshot", "/api/objects/Order", "/metrics"} {
			if got := do(t, "GET", srv.URL+path, "", "", h...); got != 401 {
				t.Errorf("GET %s with Authorization %q: %d, want 401", path, auth, got)
			}
		}
		if got := do(t, "POST", srv.URL+"/api/action", "", forceUnlock, h...); got != 401 {
			t.Errorf("an action with Authorization %q: %d, want 401", auth, got)
		}
	}
	if n := rdb.Exists(t.Context(), "ops:{Order:order:42}").Val(); n != 1 {
		t.Fatal("an action without the token released the lock")
	}
	for _, path := range []string{"/", "/static/app.js", "/static/auth.js"} {
		if got := do(t, "GET", srv.URL+path, "", ""); got != 200 {
			t.Errorf("GET %s without the token: %d, want 200", path, got)
		}
	}
	for _, path := range []string{"/api/snapshot", "/metrics"} {
		if got := do(t, "GET", srv.URL+path, "", "", "Authorization", "Bearer "+token); got != 200 {
			t.Errorf("GET %s with the token: %d, want 200", path, got)
		}
	}
	if got := do(t, "POST", srv.URL+"/api/action", "", forceUnlock, "Authorization", "bearer "+token); got != 200 {
		t.Errorf("an action with the token: %d, want 200", got)
	}
	// The token does not lift read-only.
	srv, _ = setup(t, dashboard.Options{Token: token, ReadOnly: true})
	if got := do(t, "POST", srv.URL+"/api/action", "", forceUnlock, "Authorization", "Bearer "+token); got != 403 {
		t.Errorf("an action with the token on a read-only dashboard: %d, want 403", got)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3": true, "[::1]:80": true, "::1": true, "localhost:8080": true, "LOCALHOST": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false, "": false,
	} {
		if got := dashboard.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
