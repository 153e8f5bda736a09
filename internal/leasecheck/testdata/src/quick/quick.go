// Package quick is handler code written from the Quickstart: it holds
// leases through the generated package alone and does not import the
// runtime, and is checked all the same.
package quick

import (
	"context"

	"quick/shoplocks"
)

func process(ctx context.Context, id int64) error { return nil }

func earlyReturn(ctx context.Context, locks *shoplocks.Locks, id int64, done bool) error {
	lease, err := locks.Order(id).Lock(ctx) // want `lease is not released on all paths`
	if err != nil {
		return err
	}
	if done {
		return nil // want `this return statement may be reached without releasing lease, obtained on line 15`
	}
	defer lease.Unlock(ctx)
	return process(lease.Context(), id)
}

func discardedPermit(ctx context.Context, sems *shoplocks.Semaphores) error {
	_, err := sems.Export("acme").Acquire(ctx, 1) // want `the permit returned by Acquire is discarded`
	return err
}

func callersContext(ctx context.Context, locks *shoplocks.Locks, id int64) error {
	lease, err := locks.Order(id).Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx)
	return process(ctx, id) // want `ctx is the context lease was obtained with`
}

func toGoroutine(ctx context.Context, locks *shoplocks.Locks, id int64) error {
	lease, err := locks.Order(id).Lock(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer lease.Unlock(context.Background())
		_ = process(ctx, id) // want `ctx is the context lease was obtained with`
	}()
	return nil
}

func lockDiscarded(ctx context.Context, locks *shoplocks.Locks, id int64) {
	locks.Order(id).Lock(ctx) // want `the lease is discarded`
}
