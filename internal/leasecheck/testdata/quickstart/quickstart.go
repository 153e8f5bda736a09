// Package quickstart is handler code written from the README's
// Quickstart: it uses a generated package (examples/ops/shopops) and does
// not import the runtime, for the test that runs leasecheck on it.
package quickstart

import (
	"context"

	"github.com/lockgen/lockgen/examples/ops/shopops"
)

func process(ctx context.Context, id int64) error { return nil }

func EarlyReturn(ctx context.Context, locks *shopops.Locks, id int64, done bool) error {
	lease, err := locks.Order(id).Lock(ctx)
	if err != nil {
		return err
	}
	if done {
		return nil
	}
	defer lease.Unlock(ctx)
	return process(lease.Context(), id)
}

func DiscardedPermit(ctx context.Context, sems *shopops.Semaphores) error {
	_, err := sems.Export("acme").Acquire(ctx, 1)
	return err
}

func CallersContext(ctx context.Context, locks *shopops.Locks, id int64) error {
	lease, err := locks.Order(id).Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx)
	return process(ctx, id)
}

func ToGoroutine(ctx context.Context, locks *shopops.Locks, id int64) error {
	lease, err := locks.Order(id).Lock(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer lease.Unlock(context.Background())
		_ = process(ctx, id)
	}()
	return nil
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// Released through must: the caller's context is right again after it.
func ReleaseWrapped(ctx context.Context, locks *shopops.Locks, id int64) error {
	lease, err := locks.Order(id).Lock(ctx)
	if err != nil {
		return err
	}
	_ = process(lease.Context(), id)
	must(lease.Unlock(ctx))
	return process(ctx, id)
}

// Silenced on purpose.
func Audited(ctx context.Context, locks *shopops.Locks, id int64) error {
	lease, err := locks.Order(id).Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx)
	return process(ctx, id) //lockgen:ignore the audit record is written even if the lock is lost
}

func LockDiscarded(ctx context.Context, locks *shopops.Locks, id int64) {
	locks.Order(id).Lock(ctx)
}
