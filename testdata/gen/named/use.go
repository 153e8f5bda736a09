package namedlocks

import (
	"context"

	"example.com/gentest/named/ids"
	lockrt "github.com/lockgen/lockgen/runtime"
)

func use(ctx context.Context, c *lockrt.Client) error {
	if err := Preload(ctx, c); err != nil {
		return err
	}
	locks := NewLocks(c)
	lease, err := locks.Tenant(ids.TenantID("acme"), Region("eu"), 3).Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx)
	_ = locks.Account(42, 7)
	return nil
}
