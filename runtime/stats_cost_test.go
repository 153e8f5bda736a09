//go:build costs

package runtime_test

import (
	"context"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// TestStatsLockCost: a Lock and its Unlock allocate no more with
// WithStats than without (make costs).
func TestStatsLockCost(t *testing.T) {
	_, b := ownNode(t)
	ctx := context.Background()
	d := def(t, lockrt.Reentrant, time.Minute, false, time.Second)
	allocs := func(c *lockrt.Client, k string) float64 {
		l := c.Lock(d, k)
		return testing.AllocsPerRun(200, func() {
			le, err := l.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	plain := allocs(newClient(t, b), key(t, "plain"))
	stats := allocs(newClientWith(t, b, lockrt.WithStats(statsNS(t))), key(t, "stats"))
	t.Logf("a Lock and Unlock: %v allocations without stats, %v with", plain, stats)
	if stats > plain {
		t.Errorf("WithStats adds %v allocations to a Lock and Unlock", stats-plain)
	}
}
