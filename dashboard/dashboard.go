// Package dashboard serves the live state of a lockgen spec's objects as a
// web page, a JSON API and Prometheus metrics: the http.Handler behind
// `lockgen serve`, for a service to mount as well.
//
//	in, err := inspect.Load(rdb, "lockgen.yaml", inspect.Options{})
//	...
//	mux.Handle("/debug/lockgen/", http.StripPrefix("/debug/lockgen", dashboard.New(in, dashboard.Options{ReadOnly: true})))
//
// Routes, relative to where it is mounted:
//
//	GET  /                    the page (HTML, JS and CSS embedded; nothing from a CDN)
//	GET  /api/snapshot        every object's totals, each with its "summary" as the
//	                          page shows it (inspect.Brief), and the wait-for graph (JSON)
//	GET  /api/objects/{name}  one object's live instances (JSON), each with its "view"
//	                          (inspect.View: what the page shows and offers)
//	POST /api/action          {"action": "force-unlock"|"redrive"|"purge"|"set-permits"|"pause"|"resume",
//	                           "object": "Order", "params": ["42"], "n": 0}
//	                          or on one queue item by id:
//	                          {"action": "remove-item"|"redrive-item"|"run-item-now"|"bury-item",
//	                           "object": "Email", "params": ["acme"], "id": "billing.7"}
//	GET  /metrics             the observed state in Prometheus' text format
//	GET  /api/history/{name}  one object's last hour, a minute at a time (JSON; see History)
//
// A queue instance lists its items with their ids: the first ready ones,
// the delayed ones with their due times, the deliveries in flight with
// their attempt and deadline, and the dead letters with their reasons
// (inspect.QueueState), the unique key an item was enqueued under, and,
// for a queue whose spec keeps them (retention), the items acknowledged
// within the window, as done.
// The page offers remove on ready, delayed and dead items, redrive on dead
// letters, run now on delayed items and dead-letter (bury-item, with an
// optional "reason") on ready and delayed ones; and pause or resume on a
// queue instance, whose state then starts with PAUSED. An item
// action answers 200 with "was" (where the item was: ready, delayed,
// in-flight, dead, or "" when no item has the id) and "done" (whether it
// changed it): a second run, or an unknown id, answers done false and
// says nothing changed; an item the action does not apply to (a remove of
// one in flight) answers 409 with the reason.
//
// The page renders every kind alike, from the summaries and views: a
// kind's words, details and actions are its file's in package inspect.
//
// # Security
//
// Every request first passes the guard (guard.go): its Host header must
// name an IP literal, localhost or one of Options.AllowedHosts (else 403:
// DNS rebinding); a POST from another origin is refused with 403
// (net/http's CrossOriginProtection); and with Options.Token set, the API
// and /metrics need "Authorization: Bearer <token>" (else 401). Actions
// are then refused with 403 when ReadOnly is set, and need a JSON body
// (Content-Type: application/json, else 415). Without a token the handler
// does no authentication: bind it to loopback (serve's default; serve
// refuses another address with actions enabled and no token), set a
// Token, or mount it behind your own.
//
// # History
//
// GET /api/history/{name} answers an object's last hour, a minute at a
// time, as the charts the page draws under the object's instances
// (History; drawn with uPlot, vendored in assets/vendor/uplot with its
// license). It comes from the namespace's per-minute hashes in Redis
// (runtime.StatsKey; the hour read in one pipeline, runtime.ReadStats),
// written by two sources:
//
//   - Counts of what the services did, by the runtime of every client
//     created with runtime.WithStats(namespace): each event per object
//     and minute (locks acquired and released, with the wait and the
//     hold summed; queue items enqueued, delivered, acked, nacked,
//     dead-lettered and made due, with their lateness; limiter requests
//     allowed and denied; a kind added later, such as a schedule's fires,
//     shows by its name). Counted where it happens, in memory, and
//     flushed once a minute per client (one pipelined HINCRBY batch): no
//     command per operation, and nothing to run beside the services.
//     Only the runtime sees these: a scan of Redis cannot.
//   - Samples of state, which no one runtime sees whole (a queue's depth
//     is what every producer and consumer did): the dashboard writes the
//     gauges of a snapshot (those of /metrics: queue items by state,
//     locks held, permits in use, waiters) at most once a minute (one
//     HSET and one EXPIRE), when the page asks for a snapshot or a
//     scraper for /metrics; `lockgen serve` also samples every minute
//     (Sample). A minute no dashboard sampled is a gap in those charts.
//
// Prometheus is not read: where one scrapes /metrics or the runtime's
// adapter, its graphs hold longer histories, while this hour needs no
// Prometheus and shares the services' Redis. A read-only dashboard still
// writes its samples (they are no object's state); a Redis user that may
// not write makes them fail, silently, leaving the charts of state empty.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/inspect"
)

//go:embed assets
var assets embed.FS

// Options configure a dashboard.
type Options struct {
	// ReadOnly refuses every action.
	ReadOnly bool
	// Refresh is how often the page reloads the state (0: 2s).
	Refresh time.Duration
	// Timeout bounds one request's Redis work (0: 10s).
	Timeout time.Duration
	// AllowedHosts are the names the Host header may give besides IP
	// literals, localhost and names under .localhost, which are always
	// allowed: "dash.example.com", ".example.com" (any name under it), or
	// "*" (any: behind a proxy that checks it). A request naming another
	// host is refused with 403 (a page rebinding its own name to this
	// address: DNS rebinding).
	AllowedHosts []string
	// Token, when set, is required as "Authorization: Bearer <token>" by
	// every /api/ and /metrics request (401 without it). The page asks for
	// it once, or takes it from its URL's fragment (#token=...), and keeps
	// it in the tab's sessionStorage.
	Token string
}

type handler struct {
	in   *inspect.Inspector
	opts Options
	mux  *http.ServeMux

	sampled atomic.Int64 // the last minute the history was sampled (history.go)
}

// New returns the dashboard of in's spec.
func New(in *inspect.Inspector, opts Options) http.Handler {
	if opts.Refresh <= 0 {
		opts.Refresh = 2 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	h := &handler{in: in, opts: opts, mux: http.NewServeMux()}
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	h.mux.HandleFunc("GET /{$}", h.index)
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	h.mux.HandleFunc("GET /api/config", h.config)
	h.mux.HandleFunc("GET /api/snapshot", h.snapshot)
	h.mux.HandleFunc("GET /api/objects/{name}", h.object)
	h.mux.HandleFunc("POST /api/action", h.action)
	h.mux.HandleFunc("GET /metrics", h.metrics)
	h.mux.HandleFunc("GET /api/history/{name}", h.history) // history.go
	return guard(h, opts)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	h.mux.ServeHTTP(w, r)
}

func (h *handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opts.Timeout)
}

func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	page, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'")
	w.Write(page)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(v)
}

// fail reports err as JSON {"error": ...} with a status that fits it.
func fail(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, inspect.ErrUnknownObject):
		status = http.StatusNotFound
	case errors.Is(err, inspect.ErrBadParams), errors.Is(err, inspect.ErrUnsupported), errors.Is(err, inspect.ErrNoID):
		status = http.StatusBadRequest
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func (h *handler) config(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"namespace": h.in.Namespace(), "readOnly": h.opts.ReadOnly,
		"refreshMs": h.opts.Refresh.Milliseconds(), "objects": h.in.Objects(),
	})
}

func (h *handler) snapshot(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	snap, err := h.in.Snapshot(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	_ = sampleSnapshot(ctx, h.in, snap, &h.sampled) // once a minute; a failure leaves a gap
	var insts []*inspect.Instance
	objs := make([]objectSummary, len(snap.Objects))
	for i, o := range snap.Objects {
		insts = append(insts, o.Instances...)
		objs[i] = objectSummary{o, inspect.Brief(o)}
		o.Instances = nil
	}
	writeJSON(w, http.StatusOK, struct {
		*inspect.Snapshot
		Objects []objectSummary `json:"objects"`
		Graph   *inspect.Graph  `json:"waitFor"`
	}{snap, objs, inspect.NewGraph(insts)})
}

// objectSummary is an object of /api/snapshot: its totals and what the
// page shows of them (inspect.Brief), whatever its kind.
type objectSummary struct {
	*inspect.ObjectState
	Summary string `json:"summary"`
}

// instanceView is an instance of /api/objects/{name}: its state and what
// the page shows of it (inspect.ViewOf), whatever its kind.
type instanceView struct {
	*inspect.Instance
	View inspect.View `json:"view"`
}

func (h *handler) object(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	l, err := h.in.Instances(ctx, r.PathValue("name"))
	if err != nil {
		fail(w, err)
		return
	}
	insts := make([]instanceView, len(l.Instances))
	for i, inst := range l.Instances {
		insts[i] = instanceView{inst, inspect.ViewOf(inst)}
	}
	writeJSON(w, http.StatusOK, struct {
		*inspect.Listing
		Instances []instanceView `json:"instances"`
	}{l, insts})
}

// Action is the body of POST /api/action.
type Action struct {
	Action string   `json:"action"` // force-unlock, redrive, purge, set-permits
	Object string   `json:"object"`
	Params []string `json:"params"`
	// N is redrive's count (0: all) or set-permits' capacity (0: the
	// spec's).
	N int `json:"n"`
	// ID is the queue item of remove-item, redrive-item, run-item-now and
	// bury-item.
	ID string `json:"id,omitempty"`
	// Reason is bury-item's reason for the dead letter (default
	// inspect.DefaultBuryReason).
	Reason string `json:"reason,omitempty"`
}

// itemActions maps the item actions of the API to inspect's.
var itemActions = map[string]string{
	"remove-item": inspect.ActionRemove, "redrive-item": inspect.ActionRedrive, "run-item-now": inspect.ActionRunNow,
	"bury-item": inspect.ActionBury,
}

// ItemReply is the reply to an item action.
type ItemReply struct {
	Result string   `json:"result"` // what it did, in words
	Object string   `json:"object"`
	Params []string `json:"params"`
	inspect.ItemResult
}

func (h *handler) action(w http.ResponseWriter, r *http.Request) {
	if h.opts.ReadOnly {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "the dashboard is read-only"})
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "send the action as application/json"})
		return
	}
	var a Action
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&a); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	if action, ok := itemActions[a.Action]; ok {
		h.itemAction(ctx, w, action, a)
		return
	}
	var (
		result string
		err    error
	)
	switch a.Action {
	case "force-unlock":
		var held bool
		held, err = h.in.ForceUnlock(ctx, a.Object, a.Params...)
		result = fmt.Sprintf("force-unlocked (was held: %v)", held)
	case "redrive":
		var n int
		n, err = h.in.Redrive(ctx, a.N, a.Object, a.Params...)
		result = fmt.Sprintf("redrove %d dead letters", n)
	case "purge":
		var did bool
		did, err = h.in.Purge(ctx, a.Object, a.Params...)
		result = fmt.Sprintf("purged (had items: %v)", did)
	case "pause":
		err = h.in.Pause(ctx, a.Object, a.Params...)
		result = "paused its consumers (producers keep offering)"
	case "resume":
		err = h.in.Resume(ctx, a.Object, a.Params...)
		result = "resumed its consumers"
	case "set-permits":
		err = h.in.SetPermits(ctx, a.N, a.Object, a.Params...)
		result = fmt.Sprintf("permits set to %d", a.N)
		if a.N == 0 {
			result = "permits reset to the spec's"
		}
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("unknown action %q", a.Action)})
		return
	}
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": result, "object": a.Object, "params": strings.Join(a.Params, " ")})
}

func (h *handler) itemAction(ctx context.Context, w http.ResponseWriter, action string, a Action) {
	var (
		r   inspect.ItemResult
		err error
	)
	switch action {
	case inspect.ActionRemove:
		r, err = h.in.RemoveItem(ctx, a.ID, a.Object, a.Params...)
	case inspect.ActionRedrive:
		r, err = h.in.RedriveItem(ctx, a.ID, a.Object, a.Params...)
	case inspect.ActionBury:
		r, err = h.in.BuryItem(ctx, a.ID, a.Reason, a.Object, a.Params...)
	default:
		r, err = h.in.RunItemNow(ctx, a.ID, a.Object, a.Params...)
	}
	if err != nil {
		fail(w, err)
		return
	}
	if r.Refused() {
		writeJSON(w, http.StatusConflict, map[string]string{"error": r.String()})
		return
	}
	if a.Params == nil {
		a.Params = []string{}
	}
	writeJSON(w, http.StatusOK, ItemReply{Result: r.String(), Object: a.Object, Params: a.Params, ItemResult: r})
}
