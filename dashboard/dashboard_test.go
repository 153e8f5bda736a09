package dashboard_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
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

// TestSummariesAndViews checks what the page renders every kind from:
// each object's summary in /api/snapshot and each instance's view in
// /api/objects/{name} (inspect.Brief and inspect.ViewOf).
func TestSummariesAndViews(t *testing.T) {
	srv, _ := setup(t, dashboard.Options{})
	var snap struct {
		Objects []struct{ Name, Summary string } `json:"objects"`
	}
	get(t, srv.URL+"/api/snapshot", &snap)
	summaries := map[string]string{}
	for _, o := range snap.Objects {
		summaries[o.Name] = o.Summary
	}
	for name, want := range map[string]string{
		"Order": "1 held", "Export": "3/4 permits in use", "Email": "2 ready, 1 delayed, 1 in flight, 1 dead",
		"Warmup": "0 open", "API": "0 exhausted",
	} {
		if summaries[name] != want {
			t.Errorf("%s's summary %q, want %q", name, summaries[name], want)
		}
	}
	view := func(object string) inspect.View {
		var l struct {
			Instances []struct{ View inspect.View } `json:"instances"`
		}
		get(t, srv.URL+"/api/objects/"+object, &l)
		if len(l.Instances) != 1 {
			t.Fatalf("%s: %d instances, want 1", object, len(l.Instances))
		}
		return l.Instances[0].View
	}
	if v := view("Order"); v.Class != "held" || !strings.HasPrefix(v.State, "held by billing:1, ") || len(v.Actions) != 1 || v.Actions[0].Action != "force-unlock" {
		t.Errorf("Order's view %+v", v)
	}
	if v := view("Export"); v.State != "3/4 permits in use, 1 free" || len(v.Actions) != 1 || v.Actions[0].N == nil || *v.Actions[0].N != 4 {
		t.Errorf("Export's view %+v", v)
	}
	v := view("Email")
	var states []string
	for _, it := range v.Items {
		states = append(states, it.State)
	}
	if got := strings.Join(states, " "); got != "ready ready delayed in-flight dead" || len(v.Actions) != 3 || v.Actions[1].Action != "pause" { // redrive, pause, purge
		t.Errorf("Email's view: items %s, actions %+v", got, v.Actions)
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

// TestItemActions acts on the demo's Email("acme") items by id: exactly
// that item changes, a second run answers done false, an item in flight
// is refused with 409, and the listing shows every item's id.
func TestItemActions(t *testing.T) {
	srv, rdb := setup(t, dashboard.Options{})
	ctx := t.Context()
	const key = "ops:{Email:email:acme}"
	ready := rdb.LRange(ctx, key, 0, -1).Val() // bob, cy
	delayed := rdb.ZRange(ctx, key+":delayed", 0, -1).Val()
	inFlight := rdb.ZRange(ctx, key+":inflight", 0, -1).Val()
	dead := rdb.LRange(ctx, key+":dead", 0, -1).Val()
	if len(ready) != 2 || len(delayed) != 1 || len(inFlight) != 1 || len(dead) != 1 {
		t.Fatalf("demo queue: ready %v, delayed %v, in flight %v, dead %v", ready, delayed, inFlight, dead)
	}
	var l inspect.Listing
	get(t, srv.URL+"/api/objects/Email", &l)
	q := l.Instances[0].Queue
	if len(q.ReadyItems) != 2 || q.ReadyItems[0].ID != ready[0] || q.ReadyItems[0].Body != `"bob@example.com"` ||
		len(q.DelayedItems) != 1 || q.DelayedItems[0].ID != delayed[0] || *q.DelayedItems[0].DueMs <= 0 ||
		q.Deliveries[0].ID != inFlight[0] || q.DeadLetters[0].ID != dead[0] {
		t.Fatalf("the listing's items: %+v", q)
	}
	act := func(body string) (int, dashboard.ItemReply, string) {
		t.Helper()
		r, err := http.Post(srv.URL+"/api/action", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var raw json.RawMessage
		json.NewDecoder(r.Body).Decode(&raw)
		var reply dashboard.ItemReply
		json.Unmarshal(raw, &reply)
		return r.StatusCode, reply, string(raw)
	}
	item := func(action, id string) string {
		return `{"action":"` + action + `","object":"Email","params":["acme"],"id":"` + id + `"}`
	}
	code, r, raw := act(item("remove-item", ready[0]))
	if code != 200 || !r.Done || r.Was != "ready" || r.ID != ready[0] || !strings.Contains(r.Result, "removed item") {
		t.Fatalf("remove-item: %d %s", code, raw)
	}
	if got := rdb.LRange(ctx, key, 0, -1).Val(); len(got) != 1 || got[0] != ready[1] {
		t.Errorf("ready list after remove-item: %v, want %v", got, ready[1:])
	}
	code, r, raw = act(item("remove-item", ready[0]))
	if code != 200 || r.Done || r.Was != "" || !strings.Contains(r.Result, "nothing changed") {
		t.Errorf("remove-item again: %d %s", code, raw)
	}
	code, _, raw = act(item("remove-item", inFlight[0]))
	if code != 409 || !strings.Contains(raw, "in flight") {
		t.Errorf("remove-item in flight: %d %s", code, raw)
	}
	code, r, raw = act(item("run-item-now", delayed[0]))
	if code != 200 || !r.Done || r.Was != "delayed" {
		t.Errorf("run-item-now: %d %s", code, raw)
	}
	code, r, raw = act(item("redrive-item", dead[0]))
	if code != 200 || !r.Done || r.Was != "dead" {
		t.Errorf("redrive-item: %d %s", code, raw)
	}
	if got := rdb.LRange(ctx, key, 0, -1).Val(); strings.Join(got, " ") != ready[1]+" "+delayed[0]+" "+dead[0] {
		t.Errorf("ready list %v, want %s %s %s", got, ready[1], delayed[0], dead[0])
	}
	for body, want := range map[string]int{
		`{"action":"remove-item","object":"Email","params":["acme"]}`:          400, // no id
		`{"action":"remove-item","object":"Order","params":["42"],"id":"x"}`:   400, // not a queue
		`{"action":"redrive-item","object":"Nope","id":"x"}`:                   404,
		`{"action":"run-item-now","object":"Email","params":[],"id":"x"}`:      400,
		`{"action":"remove-item","object":"Email","params":["acme"],"id":"x"}`: 200, // no such item: nothing changed
	} {
		if code, _, raw := act(body); code != want {
			t.Errorf("%s: %d %s, want %d", body, code, raw, want)
		}
	}
}

// TestQueueOps pauses and resumes the demo's Email("acme") queue (the
// listing says PAUSED and offers resume; a Take takes nothing meanwhile)
// and dead-letters one ready item with a reason (bury-item).
func TestQueueOps(t *testing.T) {
	srv, rdb := setup(t, dashboard.Options{})
	ctx := t.Context()
	const key = "ops:{Email:email:acme}"
	offers := func() []string {
		var l inspect.Listing
		get(t, srv.URL+"/api/objects/Email", &l)
		var as []string
		for _, a := range inspect.ViewOf(l.Instances[0]).Actions {
			as = append(as, a.Action)
		}
		return as
	}
	if as := offers(); !slices.Contains(as, "pause") || slices.Contains(as, "resume") {
		t.Fatalf("a running queue offers %v, want pause", as)
	}
	code, m := post(t, srv.URL+"/api/action", "application/json", `{"action":"pause","object":"Email","params":["acme"]}`)
	if code != 200 || !strings.Contains(m["result"], "paused") {
		t.Fatalf("pause: %d %v", code, m)
	}
	if rdb.Exists(ctx, key+":paused").Val() != 1 {
		t.Fatal("no pause key")
	}
	var l inspect.Listing
	get(t, srv.URL+"/api/objects/Email", &l)
	if q := l.Instances[0].Queue; !q.Paused || !strings.HasPrefix(inspect.ViewOf(l.Instances[0]).State, "PAUSED") {
		t.Fatalf("the listing of a paused queue: %+v", q)
	}
	if as := offers(); !slices.Contains(as, "resume") {
		t.Fatalf("a paused queue offers %v, want resume", as)
	}
	ready := rdb.LRange(ctx, key, 0, -1).Val()
	r, err := http.Post(srv.URL+"/api/action", "application/json", strings.NewReader(
		`{"action":"bury-item","object":"Email","params":["acme"],"id":"`+ready[0]+`","reason":"bounced"}`))
	if err != nil {
		t.Fatal(err)
	}
	var reply dashboard.ItemReply
	json.NewDecoder(r.Body).Decode(&reply)
	r.Body.Close()
	if r.StatusCode != 200 || !reply.Done || reply.Was != "ready" {
		t.Fatalf("bury-item: %d %+v", r.StatusCode, reply)
	}
	if reason := rdb.HGet(ctx, key+":err", ready[0]).Val(); reason != "bounced" {
		t.Errorf("the dead letter's reason is %q", reason)
	}
	code, m = post(t, srv.URL+"/api/action", "application/json", `{"action":"resume","object":"Email","params":["acme"]}`)
	if code != 200 || !strings.Contains(m["result"], "resumed") || rdb.Exists(ctx, key+":paused").Val() != 0 {
		t.Fatalf("resume: %d %v", code, m)
	}
	if code, m := post(t, srv.URL+"/api/action", "application/json", `{"action":"pause","object":"Order","params":["42"]}`); code != 400 {
		t.Errorf("pause of a lock: %d %v, want 400", code, m)
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
