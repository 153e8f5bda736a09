// Package vet uses the real runtime, for the test that runs leasecheck
// through go vet -vettool and on its own.
package vet

import (
	"context"

	lockrt "github.com/lockgen/lockgen/runtime"
)

func work(ctx context.Context) error { return nil }

func Leaky(ctx context.Context, l *lockrt.Lock, skip bool) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	if skip {
		return nil
	}
	defer lease.Unlock(ctx)
	return work(ctx)
}
