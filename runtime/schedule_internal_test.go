package runtime

import (
	"slices"
	"testing"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// TestTimetable: every: ticks are the multiples of the period since the
// epoch, @every ones too; cron ticks follow the expression in the
// schedule's time zone, across a daylight-saving change; pending lists the
// newest n ticks in (after, upTo], oldest first.
func TestTimetable(t *testing.T) {
	every, err := parseTimetable(&impl.ScheduleDef{Name: "E", Every: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := every.next(10_000); got != 10_500 {
		t.Errorf("every 1.5s after 10000: %d, want 10500", got)
	}
	if got := every.pending(10_000, 16_000, 3); !slices.Equal(got, []int64{12_000, 13_500, 15_000}) {
		t.Errorf("pending: %v", got)
	}
	desc, err := parseTimetable(&impl.ScheduleDef{Name: "D", Cron: "@every 30s"})
	if err != nil || desc.every != 30*time.Second || desc.cron != nil {
		t.Fatalf("@every 30s: %+v, %v", desc, err)
	}
	paris, err := parseTimetable(&impl.ScheduleDef{Name: "N", Cron: "0 3 * * *", Timezone: "Europe/Paris"})
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation("Europe/Paris")
	// 2026-03-29: clocks go from 02:00 to 03:00 in Paris.
	start := time.Date(2026, 3, 27, 12, 0, 0, 0, loc).UnixMilli()
	var got []string
	for tk := paris.next(start); len(got) < 3; tk = paris.next(tk) {
		got = append(got, time.UnixMilli(tk).In(loc).Format("2006-01-02 15:04 MST"))
	}
	want := []string{"2026-03-28 03:00 CET", "2026-03-29 03:00 CEST", "2026-03-30 03:00 CEST"}
	if !slices.Equal(got, want) {
		t.Errorf("0 3 * * * in Paris: %v, want %v", got, want)
	}
	end := time.Date(2026, 3, 31, 12, 0, 0, 0, loc).UnixMilli()
	if p := paris.pending(start, end, 2); len(p) != 2 || time.UnixMilli(p[1]).In(loc).Day() != 31 {
		t.Errorf("pending: %v", p)
	}
	if _, err := parseTimetable(&impl.ScheduleDef{Name: "B", Cron: "61 * * * *"}); err == nil {
		t.Error("a bad cron parsed")
	}
	if _, err := parseTimetable(&impl.ScheduleDef{Name: "Z", Cron: "@daily", Timezone: "Mars/Olympus"}); err == nil {
		t.Error("a bad time zone parsed")
	}
	// Jitter: the same offset for a tick on every replica, within bounds.
	s := &schedule{def: &impl.ScheduleDef{ID: "J", Jitter: time.Second}}
	for tk := int64(0); tk < 100_000; tk += 1000 {
		if o := s.offset(tk); o < 0 || o > 1000 || o != s.offset(tk) {
			t.Fatalf("offset of %d: %d", tk, o)
		}
	}
}
