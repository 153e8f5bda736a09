package dashboard_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/dashboard"
	"github.com/lockgen/lockgen/examples/ops/demo"
	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/scripts/redistest"
)

const spec = "../examples/ops/shopops/lockgen.yaml"

func setup(t *testing.T, opts dashboard.Options) (*httptest.Server, redis.UniversalClient) {
	t.Helper()
	rdb := redistest.Single(t).Client()
	done, err := demo.Populate(t.Context(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	in, err := inspect.Load(rdb, spec, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	srv := httptest.NewServer(dashboard.New(in, opts))
	t.Cleanup(srv.Close)
	return srv, rdb
}

func get(t *testing.T, url string, v any) *http.Response {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if v != nil {
		if err := json.NewDecoder(r.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return r
}

func post(t *testing.T, url, contentType, body string) (int, map[string]string) {
	t.Helper()
	r, err := http.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var m map[string]string
	json.NewDecoder(r.Body).Decode(&m)
	return r.StatusCode, m
}

// parseMetrics reads Prometheus' text format into series -> value,
// checking every sample has a HELP and TYPE line before it.
func parseMetrics(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	typed := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(f, " ")
			if kind != "gauge" {
				t.Errorf("%s is a %s", name, kind)
			}
			typed[name] = true
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series, val := line[:i], line[i+1:]
		name, _, _ := strings.Cut(series, "{")
		if !typed[name] {
			t.Errorf("sample %q before its TYPE line", line)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Errorf("sample %q: %v", line, err)
		}
		out[series] = v
	}
	return out
}

func TestSnapshotAndMetrics(t *testing.T) {
	srv, _ := setup(t, dashboard.Options{})
	var snap inspect.Snapshot
	if r := get(t, srv.URL+"/api/snapshot", &snap); r.StatusCode != 200 {
		t.Fatalf("snapshot: %s", r.Status)
	}
	totals := map[string]inspect.Totals{}
	for _, o := range snap.Objects {
		totals[o.Name] = o.Totals
	}
	if q := totals["Email"]; q.Ready != 2 || q.Delayed != 1 || q.InFlight != 1 || q.Dead != 1 {
		t.Errorf("Email totals %+v", q)
	}
	var l inspect.Listing
	get(t, srv.URL+"/api/objects/Order", &l)
	if len(l.Instances) != 1 || l.Instances[0].Lock.Holders[0].Owner != "billing:1" {
		t.Errorf("Order listing: %+v", l.Instances)
	}
	if r := get(t, srv.URL+"/api/objects/Nope", nil); r.StatusCode != 404 {
		t.Errorf("unknown object: %s", r.Status)
	}

	r, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	r.Body.Close()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("metrics Content-Type %q", ct)
	}
	m := parseMetrics(t, b.String())
	for series, want := range map[string]float64{
		`lockgen_locks_held{object="Order",kind="reentrant"}`:                1,
		`lockgen_locks_held{object="Rates",kind="readwrite"}`:                1,
		`lockgen_semaphore_permits_in_use{object="Export",kind="semaphore"}`: 3,
		`lockgen_semaphore_permits{object="Export",kind="semaphore"}`:        4,
		`lockgen_queue_items{object="Email",kind="queue",state="ready"}`:     2,
		`lockgen_queue_items{object="Email",kind="queue",state="dead"}`:      1,
		`lockgen_queue_dead_letters{object="Email",kind="queue"}`:            1,
		`lockgen_waiters{object="Order",kind="reentrant"}`:                   0,
		`lockgen_deadlocks`: 0,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	for series := range m {
		if strings.Contains(series, "acme") || strings.Contains(series, "42") {
			t.Errorf("a param value in a label: %s", series)
		}
	}
}

func TestActions(t *testing.T) {
	srv, rdb := setup(t, dashboard.Options{})
	code, m := post(t, srv.URL+"/api/action", "application/json", `{"action":"force-unlock","object":"Order","params":["42"]}`)
	if code != 200 || !strings.Contains(m["result"], "was held: true") {
		t.Fatalf("force-unlock: %d %v", code, m)
	}
	if n := rdb.Exists(t.Context(), "ops:{Order:order:42}").Val(); n != 0 {
		t.Error("the lock's key is still there")
	}
	code, m = post(t, srv.URL+"/api/action", "application/json", `{"action":"redrive","object":"Email","params":["acme"]}`)
	if code != 200 || m["result"] != "redrove 1 dead letters" {
		t.Fatalf("redrive: %d %v", code, m)
	}
	code, m = post(t, srv.URL+"/api/action", "application/json", `{"action":"set-permits","object":"Export","params":["acme"],"n":6}`)
	if code != 200 {
		t.Fatalf("set-permits: %d %v", code, m)
	}
	for body, want := range map[string]int{
		`{"action":"purge","object":"Order","params":["42"]}`:  400, // not a queue
		`{"action":"explode","object":"Email","params":["a"]}`: 400,
		`{"action":"purge","object":"Nope"}`:                   404,
		`{"action":"purge","object":"Email","params":[]}`:      400,
	} {
		if code, m := post(t, srv.URL+"/api/action", "application/json", body); code != want {
			t.Errorf("%s: %d %v, want %d", body, code, m, want)
		}
	}
	if code, _ := post(t, srv.URL+"/api/action", "application/x-www-form-urlencoded", `action=purge`); code != 415 {
		t.Errorf("a form post: %d, want 415", code)
	}
}

func TestReadOnly(t *testing.T) {
	srv, rdb := setup(t, dashboard.Options{ReadOnly: true})
	code, _ := post(t, srv.URL+"/api/action", "application/json", `{"action":"force-unlock","object":"Order","params":["42"]}`)
	if code != 403 {
		t.Errorf("force-unlock on a read-only dashboard: %d, want 403", code)
	}
	if n := rdb.Exists(t.Context(), "ops:{Order:order:42}").Val(); n != 1 {
		t.Error("a read-only dashboard released the lock")
	}
	var cfg map[string]any
	get(t, srv.URL+"/api/config", &cfg)
	if cfg["readOnly"] != true {
		t.Errorf("config %v", cfg)
	}
}

func TestPage(t *testing.T) {
	srv, _ := setup(t, dashboard.Options{})
	for path, want := range map[string]string{"/": "static/app.js", "/static/app.js": "api/snapshot", "/static/style.css": "table"} {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		r.Body.Close()
		if r.StatusCode != 200 || !strings.Contains(b.String(), want) {
			t.Errorf("GET %s: %s, body lacks %q", path, r.Status, want)
		}
		if strings.Contains(b.String(), "https://") {
			t.Errorf("GET %s loads something from the network", path)
		}
	}
}
