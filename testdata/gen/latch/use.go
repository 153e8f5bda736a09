package shoplatches

import (
	"context"

	lockrt "github.com/lockgen/lockgen/runtime"
)

func use(ctx context.Context, c *lockrt.Client, job string) error {
	latches := NewLatches(c)
	if _, err := latches.Warmup(job).CountDown(ctx); err != nil {
		return err
	}
	return latches.ShardsLoaded("eu", 20240101).Await(ctx)
}
