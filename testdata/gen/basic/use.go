package shoplocks

import (
	"context"

	lockrt "github.com/lockgen/lockgen/runtime"
)

func use(ctx context.Context, c *lockrt.Client, orderID int64) error {
	lease, err := NewLocks(c).Order(orderID).Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx)
	return Preload(lease.Context(), c)
}
