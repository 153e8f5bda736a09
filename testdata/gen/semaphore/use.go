package shopsems

import (
	"context"

	lockrt "github.com/lockgen/lockgen/runtime"
)

func use(ctx context.Context, c *lockrt.Client, tenant string) error {
	if err := Preload(ctx, c); err != nil {
		return err
	}
	sems := NewSemaphores(c)
	permit, err := sems.Export(tenant).Acquire(ctx, 2)
	if err != nil {
		return err
	}
	defer permit.Release(ctx)
	_, err = sems.ReportSlots("eu", 3).Available(permit.Context())
	return err
}
