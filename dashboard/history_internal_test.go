package dashboard

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime"
)

// TestHistoryOf: the charts of an object's minutes: a gauge not sampled
// in a minute is null there, a count is 0, a duration's mean is its sum
// over its count in ms (null with none), and a kind the page has no word
// for (a schedule's fires, added later) is charted by its name.
func TestHistoryOf(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0).Truncate(time.Minute)
	ms := []runtime.StatsMinute{
		{Start: t0, Objects: map[string]map[string]int64{"Q": {"gauge.queue_items.ready": 5, "acked": 4, "due": 4, "due.us": 8000, "fired": 1}}},
		{Start: t0.Add(time.Minute), Objects: map[string]map[string]int64{"Other": {"acked": 9}}},
		{Start: t0.Add(2 * time.Minute), Objects: map[string]map[string]int64{"Q": {"gauge.queue_items.ready": 7, "nacked": 2}}},
	}
	h := historyOf("Q", ms)
	if !h.Counted || len(h.Minutes) != 3 || h.Minutes[0] != t0.Unix() {
		t.Fatalf("history %+v", h)
	}
	got := map[string]string{}
	for _, c := range h.Charts {
		for _, s := range c.Series {
			var vs []string
			for _, v := range s.Values {
				if v == nil {
					vs = append(vs, "null")
				} else {
					vs = append(vs, formatFloat(*v))
				}
			}
			got[c.ID+"/"+s.Name] = join(vs)
		}
	}
	want := map[string]string{
		"state/ready":                       "5 null 7",
		"events/made due":                   "4 0 0",
		"events/processed (acked)":          "4 0 0",
		"events/failed (nacked)":            "0 0 2",
		"events/fired":                      "1 0 0",
		"durations/delivery lateness (due)": "2 null null",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	var order []string
	for _, s := range h.Charts[1].Series {
		order = append(order, s.Name)
	}
	if join(order) != "made due processed (acked) failed (nacked) fired" {
		t.Errorf("the events' order: %v", order)
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func join(s []string) string { return strings.Join(s, " ") }
