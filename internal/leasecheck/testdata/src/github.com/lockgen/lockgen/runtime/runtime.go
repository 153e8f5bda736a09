// Package runtime is a stub of lockgen's runtime: the types and methods
// leasecheck knows, with the real signatures.
package runtime

import (
	"context"
	"time"
)

type Lock struct{}

func (l *Lock) Lock(ctx context.Context) (*Lease, error)                        { return &Lease{}, nil }
func (l *Lock) TryLock(ctx context.Context, wait time.Duration) (*Lease, error) { return &Lease{}, nil }
func (l *Lock) IsLocked(ctx context.Context) (bool, error)                      { return false, nil }

type Lease struct{}

func (le *Lease) Context() context.Context                      { return context.Background() }
func (le *Lease) Lock() *Lock                                   { return nil }
func (le *Lease) Token() int64                                  { return 0 }
func (le *Lease) Unlock(ctx context.Context) error              { return nil }
func (le *Lease) Downgrade(ctx context.Context) (*Lease, error) { return &Lease{}, nil }

type Semaphore struct{}

func (s *Semaphore) Acquire(ctx context.Context, n int) (*Permit, error) { return &Permit{}, nil }

type Permit struct{}

func (p *Permit) Context() context.Context          { return context.Background() }
func (p *Permit) Release(ctx context.Context) error { return nil }

type MultiLock struct{}

func (m *MultiLock) Lock(ctx context.Context) (*MultiLease, error) { return &MultiLease{}, nil }

type MultiLease struct{}

func (ml *MultiLease) Context() context.Context         { return context.Background() }
func (ml *MultiLease) Unlock(ctx context.Context) error { return nil }

type RedLock struct{}

func (r *RedLock) Lock(ctx context.Context) (*RedLockLease, error) { return &RedLockLease{}, nil }

type RedLockLease struct{}

func (le *RedLockLease) Context() context.Context         { return context.Background() }
func (le *RedLockLease) Unlock(ctx context.Context) error { return nil }
