package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/examples/orders/shoplocks"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestServeRefusesExposedActions: serve on an address other hosts reach,
// with actions and no token, exits 2 with the way out, before dialling
// Redis (the URL below has nothing listening); a bad token is a usage
// error too.
func TestServeRefusesExposedActions(t *testing.T) {
	t.Setenv(tokenEnv, "")
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	short := filepath.Join(dir, "short")
	os.WriteFile(empty, []byte("\n"), 0o600)
	os.WriteFile(short, []byte("abc\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-addr", "0.0.0.0:0"}, "lockgen serve: 0.0.0.0:0 is reachable from other hosts: give a token (-token-file FILE or $LOCKGEN_DASHBOARD_TOKEN) or -read-only\n"},
		{[]string{"-addr", ":0"}, "lockgen serve: :0 is reachable from other hosts: "},
		{[]string{"-addr", "[::]:0"}, "lockgen serve: [::]:0 is reachable from other hosts: "},
		{[]string{"-addr", "10.11.12.13:8080"}, "lockgen serve: 10.11.12.13:8080 is reachable from other hosts: "},
		{[]string{"-addr", "127.0.0.1:0", "-token-file", empty}, "lockgen serve: the token file " + empty + " is empty\n"},
		{[]string{"-addr", "0.0.0.0:0", "-token-file", short}, "lockgen serve: the token has 3 characters: give at least 16"},
		{[]string{"-addr", "0.0.0.0:0", "-token-file", filepath.Join(dir, "none")}, "lockgen serve: reading the token: "},
	} {
		code, stdout, stderr := lockgen(t, append([]string{"serve", "-spec", locksSpec, "-redis", "redis://127.0.0.1:1"}, c.args...)...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, c.want) {
			t.Errorf("serve %v: exit %d\nstderr: %s\nwant:   %s", c.args, code, stderr, c.want)
		}
	}
}

// startServe runs lockgen serve with args until the test ends, and
// returns the address it listens on.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	serveContext = func() context.Context { return ctx }
	addrs := make(chan string, 1)
	serveReady = func(addr string) { addrs <- addr }
	done := make(chan struct{})
	var code int
	var stderr string
	go func() {
		defer close(done)
		code, _, stderr = lockgen(t, append([]string{"serve"}, args...)...)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		serveContext, serveReady = context.Background, nil
		if code != 0 || stderr != "" {
			t.Errorf("serve %v: exit %d: %s", args, code, stderr)
		}
	})
	select {
	case addr := <-addrs:
		return addr
	case <-done:
		t.Fatalf("serve %v exited %d: %s", args, code, stderr)
		return ""
	}
}

// TestServeExposed: on every interface, serve starts with -read-only
// (actions refused) or with a token (from the environment or a file),
// which the API and /metrics then require; the page is served to a Host
// naming an IP or an -allow-host name, and refused to another name.
func TestServeExposed(t *testing.T) {
	node := redistest.Single(t)
	rt := runtime.New(node.Client(), runtime.WithID("svc"))
	defer rt.Close()
	if _, err := shoplocks.NewLocks(rt).Order(7).Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := "redis://" + node.Addr
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	status := func(method, url, host, auth string) int {
		t.Helper()
		var body *strings.Reader
		if method == "POST" {
			body = strings.NewReader(`{"action":"force-unlock","object":"Order","params":["7"]}`)
		} else {
			body = strings.NewReader("")
		}
		req, _ := http.NewRequest(method, url, body)
		req.Header.Set("Content-Type", "application/json")
		if host != "" {
			req.Host = host
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}

	t.Run("read-only", func(t *testing.T) {
		base := "http://127.0.0.1:" + port(startServe(t, "-spec", locksSpec, "-redis", url, "-addr", "0.0.0.0:0", "-read-only", "-allow-host", "dash.example.com"))
		for _, c := range []struct {
			method, path, host string
			want               int
		}{
			{"GET", "/api/snapshot", "", 200},
			{"GET", "/metrics", "", 200},
			{"GET", "/api/snapshot", "dash.example.com", 200},
			{"GET", "/", "evil.example", 403},
			{"GET", "/api/snapshot", "evil.example", 403},
			{"POST", "/api/action", "", 403},
		} {
			if got := status(c.method, base+c.path, c.host, ""); got != c.want {
				t.Errorf("%s %s (Host %q): %d, want %d", c.method, c.path, c.host, got, c.want)
			}
		}
	})

	const token = "0123456789abcdef-serve-test"
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte(token+"\n"), 0o600)
	for name, args := range map[string][]string{"token-file": {"-token-file", file}, "env": nil} {
		t.Run(name, func(t *testing.T) {
			if args == nil {
				t.Setenv(tokenEnv, token)
			} else {
				t.Setenv(tokenEnv, "")
			}
			base := "http://127.0.0.1:" + port(startServe(t, append([]string{"-spec", locksSpec, "-redis", url, "-addr", "0.0.0.0:0"}, args...)...))
			for _, c := range []struct {
				method, path, auth string
				want               int
			}{
				{"GET", "/", "", 200},
				{"GET", "/api/snapshot", "", 401},
				{"GET", "/metrics", "", 401},
				{"GET", "/api/snapshot", "wrong", 401},
				{"POST", "/api/action", "", 401},
				{"GET", "/api/snapshot", token, 200},
				{"GET", "/metrics", token, 200},
			} {
				if got := status(c.method, base+c.path, "", c.auth); got != c.want {
					t.Errorf("%s %s (token %q): %d, want %d", c.method, c.path, c.auth, got, c.want)
				}
			}
		})
	}
	// The lock survived every refused action; with the token it goes.
	if n := node.Client().Exists(context.Background(), "shop:{Order:order:7}").Val(); n != 1 {
		t.Fatalf("a refused action released the lock (%d keys)", n)
	}
	t.Setenv(tokenEnv, token)
	base := "http://127.0.0.1:" + port(startServe(t, "-spec", locksSpec, "-redis", url, "-addr", "0.0.0.0:0"))
	if got := status("POST", base+"/api/action", "", token); got != 200 {
		t.Errorf("an action with the token: %d, want 200", got)
	}
}

// TestServeSamplesHistory: serve samples the objects' state into the
// dashboard's history when it starts (and every minute), with no page
// open.
func TestServeSamplesHistory(t *testing.T) {
	node := redistest.Single(t)
	rt := runtime.New(node.Client(), runtime.WithID("svc"))
	defer rt.Close()
	if _, err := shoplocks.NewLocks(rt).Order(7).Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	startServe(t, "-spec", locksSpec, "-redis", "redis://"+node.Addr, "-addr", "127.0.0.1:0", "-read-only")
	rdb := node.Client()
	var ms []runtime.StatsMinute
	if !redistest.Within(30*time.Second, func() bool {
		now := time.Now()
		var err error
		ms, err = runtime.ReadStats(context.Background(), rdb, "shop", now.Add(-time.Minute), now)
		if err != nil {
			t.Fatal(err)
		}
		return ms[len(ms)-1].Objects["Order"]["gauge.locks_held"] == 1 || ms[0].Objects["Order"]["gauge.locks_held"] == 1
	}) {
		t.Fatalf("no sample of Order's locks held in the history: %+v", ms)
	}
}

// TestServeRefusesExposedName: a name that resolves to an address other
// hosts reach (this host's name, where it does) is refused once
// listened on, as its IP would be. Skipped where the name is loopback.
func TestServeRefusesExposedName(t *testing.T) {
	t.Setenv(tokenEnv, "")
	name, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	ips, err := net.LookupIP(name)
	if err != nil || len(ips) == 0 || ips[0].IsLoopback() {
		t.Skipf("%s resolves to %v (%v): no name of this host other hosts reach", name, ips, err)
	}
	node := redistest.Single(t)
	code, _, stderr := lockgen(t, "serve", "-spec", locksSpec, "-redis", "redis://"+node.Addr, "-addr", net.JoinHostPort(name, "0"))
	if code != exitUsage || !strings.Contains(stderr, "is reachable from other hosts: give a token") {
		t.Errorf("serve -addr %s:0: exit %d: %s", name, code, stderr)
	}
}
