package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/runtime"
)

// The history's sources, and why, are in the package doc (History).

// History is one object's last hour for the page: the minutes (unix
// seconds of their starts, oldest first) and charts of series over them,
// a value per minute (null: no sample).
type History struct {
	Object  string  `json:"object"`
	Minutes []int64 `json:"minutes"`
	Charts  []Chart `json:"charts"`
	// Counted tells whether any runtime counted events for the object in
	// the hour (a client with runtime.WithStats); the page says how to
	// get them when none did.
	Counted bool `json:"counted"`
}

// Chart is one chart of a History.
type Chart struct {
	ID     string   `json:"id"` // "state", "events", "durations"
	Title  string   `json:"title"`
	Unit   string   `json:"unit"`
	Series []Series `json:"series"`
}

// Series is one line of a Chart.
type Series struct {
	Name   string     `json:"name"`
	Values []*float64 `json:"values"`
}

// historyMinutes is how many minutes the page shows: the hour before
// the current minute, and the current one (partial).
const historyMinutes = 61

// The words the page uses for the runtime's event kinds; another kind
// shows by its own name.
var eventNames = map[string]string{
	"acquired": "acquired", "released": "released", "lease-lost": "leases lost", "renewed": "renewed",
	"renew-failed": "renewals failed", "enqueued": "enqueued", "delivered": "delivered",
	"acked": "processed (acked)", "nacked": "failed (nacked)", "dead": "dead-lettered", "due": "made due",
	"timer-retry": "timer retries", "wait-fallback": "fallback wake-ups", "allowed": "allowed",
	"denied": "rejected (denied)",
}

// rank orders the series of a chart: the known ones in the order of an
// item's or a hold's life, then the others by name.
var rank = map[string]int{}

func init() {
	for i, n := range []string{
		"gauge.queue_items.ready", "gauge.queue_items.delayed", "gauge.queue_items.in_flight", "gauge.queue_items.dead",
		"enqueued", "due", "delivered", "acked", "nacked", "dead", "timer-retry",
		"acquired", "released", "renewed", "renew-failed", "lease-lost", "wait-fallback", "allowed", "denied",
	} {
		rank[n] = i + 1
	}
}

// byRank sorts counter names by rank, then by name.
func byRank(names []string) {
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank[names[i]], rank[names[j]]
		if ri == 0 {
			ri = len(rank) + 1
		}
		if rj == 0 {
			rj = len(rank) + 1
		}
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
}

// durationNames are the means of the events with a duration.
var durationNames = map[string]string{
	"acquired": "wait (acquired)", "released": "hold (released)", "due": "delivery lateness (due)",
	"wait-fallback": "wait (fallback)",
}

func (h *handler) history(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	known := false
	for _, o := range h.in.Objects() {
		known = known || o.Name == name
	}
	if !known {
		fail(w, fmt.Errorf("%w: %q", inspect.ErrUnknownObject, name))
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	now := time.Now()
	ms, err := runtime.ReadStats(ctx, h.in.Redis(), h.in.Namespace(), now.Add(-(historyMinutes-1)*time.Minute), now)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, historyOf(name, ms))
}

// historyOf makes an object's charts from its minutes: the sampled
// gauges, the counts per minute, and the mean of each duration summed.
func historyOf(object string, ms []runtime.StatsMinute) History {
	hist := History{Object: object, Minutes: make([]int64, len(ms))}
	names := map[string]bool{}
	for i, m := range ms {
		hist.Minutes[i] = m.Start.Unix()
		for c := range m.Objects[object] {
			names[c] = true
		}
	}
	var gauges, counts, durs []string
	for c := range names {
		switch {
		case strings.HasPrefix(c, "gauge."):
			gauges = append(gauges, c)
		case strings.HasSuffix(c, ".us"):
			durs = append(durs, strings.TrimSuffix(c, ".us"))
		default:
			counts = append(counts, c)
		}
	}
	byRank(gauges)
	byRank(counts)
	byRank(durs)
	hist.Counted = len(counts) > 0
	series := func(name string, value func(map[string]int64) *float64) Series {
		s := Series{Name: name, Values: make([]*float64, len(ms))}
		for i, m := range ms {
			s.Values[i] = value(m.Objects[object])
		}
		return s
	}
	num := func(v float64) *float64 { return &v }
	if len(gauges) > 0 {
		c := Chart{ID: "state", Title: "State, sampled by the dashboard"}
		for _, g := range gauges {
			label := strings.ReplaceAll(strings.TrimPrefix(strings.TrimPrefix(g, "gauge."), "queue_items."), "_", " ")
			c.Series = append(c.Series, series(label, func(m map[string]int64) *float64 {
				if v, ok := m[g]; ok {
					return num(float64(v))
				}
				return nil // not sampled that minute
			}))
		}
		hist.Charts = append(hist.Charts, c)
	}
	if len(counts) > 0 {
		c := Chart{ID: "events", Title: "Events per minute, counted by the services' runtimes", Unit: "/min"}
		for _, k := range counts {
			label := eventNames[k]
			if label == "" {
				label = k
			}
			c.Series = append(c.Series, series(label, func(m map[string]int64) *float64 { return num(float64(m[k])) }))
		}
		hist.Charts = append(hist.Charts, c)
	}
	if len(durs) > 0 {
		c := Chart{ID: "durations", Title: "Mean durations per minute", Unit: "ms"}
		for _, k := range durs {
			label := durationNames[k]
			if label == "" {
				label = k
			}
			c.Series = append(c.Series, series(label, func(m map[string]int64) *float64 {
				if n := m[k]; n > 0 {
					return num(float64(m[k+".us"]) / float64(n) / 1000)
				}
				return nil // none that minute
			}))
		}
		hist.Charts = append(hist.Charts, c)
	}
	return hist
}

// gaugeName is a gauge's field in the history: its metric's name without
// "lockgen_", and its label values ("queue_items.ready").
func gaugeName(g inspect.Gauge) string {
	name := strings.TrimPrefix(g.Name, "lockgen_")
	for i := 1; i < len(g.Labels); i += 2 {
		name += "." + g.Labels[i]
	}
	return name
}

// sampleSnapshot writes snap's gauges in the history, once a minute per
// handler (sampled holds the last minute written).
func sampleSnapshot(ctx context.Context, in *inspect.Inspector, snap *inspect.Snapshot, sampled *atomic.Int64) error {
	minute := time.Now().Unix() / 60
	if sampled != nil && sampled.Load() == minute {
		return nil
	}
	gauges := map[string]map[string]int64{}
	for _, o := range snap.Objects {
		g := map[string]int64{}
		for _, x := range inspect.Gauges(o) {
			if x.Name == "lockgen_queue_dead_letters" {
				continue // queue_items.dead again
			}
			g[gaugeName(x)] = int64(x.Value)
		}
		gauges[o.Name] = g
	}
	if err := runtime.WriteStatsGauges(ctx, in.Redis(), in.Namespace(), time.Unix(minute*60, 0), gauges); err != nil {
		return err
	}
	if sampled != nil {
		sampled.Store(minute)
	}
	return nil
}

// Sample writes one sample of every object's state (the gauges of
// /metrics) in the namespace's history, for the minute it is in: what
// `lockgen serve` runs every minute, so that the charts of state have no
// gaps while nobody watches. It returns the error of the snapshot or of
// the write.
func Sample(ctx context.Context, in *inspect.Inspector) error {
	snap, err := in.Snapshot(ctx)
	if err != nil {
		return err
	}
	return sampleSnapshot(ctx, in, snap, nil)
}
