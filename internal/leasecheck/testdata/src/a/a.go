package a

import (
	"context"
	"errors"

	lockrt "github.com/lockgen/lockgen/runtime"
)

func work(ctx context.Context) error { return nil }

// Released on every path: nothing to report.
func deferred(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx)
	return work(lease.Context())
}

func explicit(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	err = work(lease.Context())
	if uerr := lease.Unlock(ctx); uerr != nil {
		return errors.Join(err, uerr)
	}
	return err
}

func leaky(ctx context.Context, l *lockrt.Lock, skip bool) error {
	lease, err := l.Lock(ctx) // want `lease is not released on all paths: call lease.Unlock on each, or defer it`
	if err != nil {
		return err
	}
	if skip {
		return nil // want `this return statement may be reached without releasing lease, obtained on line 35`
	}
	return lease.Unlock(ctx)
}

func neverReleased(ctx context.Context, s *lockrt.Semaphore) error {
	p, err := s.Acquire(ctx, 1) // want `p is not released on all paths: call p.Release on each`
	if err != nil {
		return err
	}
	_ = work(p.Context())
	return nil // want `this return statement may be reached without releasing p`
}

func discarded(ctx context.Context, l *lockrt.Lock) error {
	_, err := l.Lock(ctx) // want `the lease returned by Lock is discarded`
	l.Lock(ctx)           // want `the lease is discarded`
	return err
}

// Handing the lease on counts as releasing it: the receiver owns it.
func handedOn(ctx context.Context, l *lockrt.Lock, out chan<- *lockrt.Lease) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	out <- lease
	return nil
}

func returned(ctx context.Context, l *lockrt.Lock) (*lockrt.Lease, error) {
	lease, err := l.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// A nil check of the lease is not a release, and the nil branch holds
// nothing.
func nilCheck(ctx context.Context, l *lockrt.Lock) {
	lease, _ := l.Lock(ctx)
	if lease == nil {
		return
	}
	lease.Unlock(ctx)
}

func inClosure(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = lease.Unlock(context.Background()) }()
	return work(lease.Context())
}

func downgrade(ctx context.Context, l *lockrt.Lock) error {
	w, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	r, err := w.Downgrade(ctx) // hands w on to r
	if err != nil {
		return err
	}
	defer r.Unlock(ctx)
	return work(r.Context())
}

func multiAndRed(ctx context.Context, m *lockrt.MultiLock, rl *lockrt.RedLock) error {
	ml, err := m.Lock(ctx) // want `ml is not released on all paths: call ml.Unlock`
	if err != nil {
		return err
	}
	rle, err := rl.Lock(ml.Context())
	if err != nil {
		return err // want `this return statement may be reached without releasing ml`
	}
	defer rle.Unlock(ctx)
	return ml.Unlock(ctx)
}

// Work inside the hold with the caller's context is reported.
func outerContext(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return work(ctx) // the error path holds nothing
	}
	defer lease.Unlock(ctx)                    // releases take the caller's context on purpose
	if _, err := l.IsLocked(ctx); err != nil { // the runtime's own calls are fine
		return err
	}
	if err := work(ctx); err != nil { // want `ctx is the context lease was obtained with; work inside the hold should use lease.Context\(\)`
		return err
	}
	go func() { _ = work(ctx) }() // want `ctx is the context lease was obtained with`
	return nil
}

func outerContextUntilUnlock(ctx context.Context, l *lockrt.Lock, s *lockrt.Semaphore) error {
	p, err := s.Acquire(ctx, 1)
	if err != nil {
		return err
	}
	_ = work(ctx) // want `ctx is the context p was obtained with; work inside the hold should use p.Context\(\) \(or a context derived from it\), which is cancelled when the permit is lost`
	if err := p.Release(ctx); err != nil {
		return err
	}
	return work(ctx) // released: the caller's context is right again
}

func contextReplaced(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(context.Background())
	ctx = lease.Context()
	return work(ctx)
}

func shadowed(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(context.Background())
	ctx, cancel := context.WithCancel(lease.Context())
	defer cancel()
	return work(ctx)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// A release wrapped in a call ends the hold as a release statement does:
// the caller's context is right again after it.
func releaseWrapped(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	_ = work(lease.Context())
	must(lease.Unlock(ctx))
	return work(ctx)
}

func releaseJoined(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	err = work(lease.Context())
	err = errors.Join(err, lease.Unlock(ctx))
	return errors.Join(err, work(ctx))
}

// A release that may not run does not end the hold.
func releaseMaybe(ctx context.Context, l *lockrt.Lock, early bool) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx)
	if early && lease.Unlock(ctx) == nil {
		return nil
	}
	return work(ctx) // want `ctx is the context lease was obtained with`
}

// Findings silenced on purpose, with a reason.
func ignored(ctx context.Context, l *lockrt.Lock, s *lockrt.Semaphore, skip bool) error {
	_, _ = s.Acquire(ctx, 1) //lockgen:ignore the permit lives until its lease runs out, by design
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	//lockgen:ignore the audit record must be written even if the lock is lost
	_ = work(ctx)
	_ = work(ctx) // want `ctx is the context lease was obtained with`
	if skip {
		return nil //lockgen:ignore the janitor releases skipped leases
	}
	return lease.Unlock(ctx)
}

func ignoredAtHold(ctx context.Context, l *lockrt.Lock, skip bool) error {
	//lockgen:ignore handed to the janitor on the skip path
	lease, err := l.Lock(ctx)
	if err != nil || skip {
		return err
	}
	return lease.Unlock(ctx)
}

func ignoreMisused(ctx context.Context, l *lockrt.Lock) error {
	lease, err := l.Lock(ctx) /* want `lockgen:ignore needs a reason` */ //lockgen:ignore
	if err != nil {
		return err
	}
	//lockgen:ignore nothing here to silence // want `this //lockgen:ignore silences no leasecheck finding: remove it`
	return lease.Unlock(ctx)
}
