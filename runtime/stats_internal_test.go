package runtime

import (
	"context"
	"testing"
	"time"
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
