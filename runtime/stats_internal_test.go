package runtime

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockgen/lockgen/scripts/redistest"
)

// BenchmarkStatsEvent is what WithStats adds to an observed event: one
// count, and a duration's sum (go test -bench StatsEvent ./runtime).
func BenchmarkStatsEvent(b *testing.B) {
	s := &statsRecorder{ns: "bench"}
	e := Event{Kind: EventAcquired, Object: "Order", Duration: time.Millisecond}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Event(ctx, e)
		}
	})
}

// BenchmarkStatsFlush is one minute's flush of a busy client: 20
// objects with 5 event kinds each, 3 of them with durations (160
// counters), in one pipeline to a redis-server of its own.
func BenchmarkStatsFlush(b *testing.B) {
	rdb := redistest.Single(b).Client()
	s := &statsRecorder{ns: "bench"}
	ctx := context.Background()
	kinds := []EventKind{EventAcquired, EventReleased, EventDue, EventAcked, EventDenied}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for o := range 20 {
			for i, k := range kinds {
				e := Event{Kind: k, Object: "Object" + strconv.Itoa(o)}
				if i < 3 {
					e.Duration = time.Millisecond
				}
				s.Event(ctx, e)
			}
		}
		b.StartTimer()
		if err := s.flush(ctx, rdb); err != nil {
			b.Fatal(err)
		}
	}
}
