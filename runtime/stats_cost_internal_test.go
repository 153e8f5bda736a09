//go:build costs

package runtime

import (
	"context"
	"testing"
	"time"
)

// TestStatsEventCost: counting an event allocates nothing once its
// minute's counter exists, and an operation's start and end allocate
// nothing (make costs).
func TestStatsEventCost(t *testing.T) {
	s := &statsRecorder{ns: "cost"}
	e := Event{Kind: EventAcquired, Object: "Order", Duration: time.Millisecond}
	ctx := context.Background()
	s.Event(ctx, e)
	if n := testing.AllocsPerRun(1000, func() { s.Event(ctx, e) }); n != 0 {
		t.Errorf("an event allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _, end := s.Start(ctx, Op{Kind: OpLock, Object: "Order"}); end(nil) }); n != 0 {
		t.Errorf("an operation's start and end allocate %v times, want 0", n)
	}
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			s.Event(ctx, e)
		}
	})
	t.Logf("an event costs %v", time.Duration(r.NsPerOp()))
}
