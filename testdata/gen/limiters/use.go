package shoplimits

import (
	"context"
	"errors"

	lockrt "github.com/lockgen/lockgen/runtime"
)

func use(ctx context.Context, c *lockrt.Client, userID string) error {
	limits := NewLimiters(c)
	r, err := limits.API(userID).Allow(ctx)
	if errors.Is(err, lockrt.ErrConfigMismatch) {
		_, err = limits.API(userID).Reconfigure(ctx)
	}
	if err != nil || !r.Allowed {
		return err
	}
	if err := limits.Export("acme", 3).WaitN(ctx, 2); err != nil {
		return err
	}
	if err := limits.Mail().Reset(ctx); err != nil {
		return err
	}
	if _, err := limits.Mail().Reconfigure(ctx, lockrt.ResetState()); err != nil {
		return err
	}
	if _, err := limits.Mail().Refund(ctx, 1); err != nil {
		return err
	}
	_, err = limits.Login("10.0.0.1").AllowN(ctx, 0)
	if err != nil {
		return err
	}
	return Preload(ctx, c)
}
