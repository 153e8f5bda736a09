package inspect

import (
	"context"
	"fmt"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// ForceUnlock deletes a lock's holds whoever holds it and wakes its
// waiters, through the runtime's ForceUnlock (the holders' leases end with
// ErrLockLost at their next renewal). It reports whether the lock was
// held; it returns ErrUnknownObject, ErrBadParams, ErrUnsupported for an
// object that is not a lock, or a Redis error.
func (in *Inspector) ForceUnlock(ctx context.Context, object string, values ...string) (bool, error) {
	key, err := in.Key(object, values...)
	if err != nil {
		return false, err
	}
	o := in.byNm[object]
	l, ok := o.obj.(*spec.Lock)
	if !ok {
		return false, fmt.Errorf("%w: force-unlock of %s, a %s", ErrUnsupported, o.name, o.kind)
	}
	rt := in.runtimeClient("")
	def := lockDef(l)
	if l.Kind == spec.ReadWrite {
		return lockimpl.NewRWLock(rt, def, key).ForceUnlock(ctx)
	}
	return lockimpl.NewLock(rt, def, key).ForceUnlock(ctx)
}

// deadQueue is what every runtime queue type offers operators.
type deadQueue interface {
	Redrive(ctx context.Context, n int) (int, error)
}

// rawCodec passes items through as stored.
type rawCodec struct{}

func (rawCodec) Encode(v []byte) ([]byte, error)    { return v, nil }
func (rawCodec) Decode(data []byte) ([]byte, error) { return data, nil }

func (in *Inspector) runtimeQueue(object string, values []string) (deadQueue, *object, string, error) {
	key, err := in.Key(object, values...)
	if err != nil {
		return nil, nil, "", err
	}
	o := in.byNm[object]
	sq, ok := o.obj.(*spec.Queue)
	if !ok {
		return nil, o, "", fmt.Errorf("%w: %s is a %s, not a queue", ErrUnsupported, o.name, o.kind)
	}
	rt, def := in.runtimeClient(""), defs.Queue(sq)
	var q deadQueue
	switch {
	case def.Reliable && def.Delay:
		q = lockimpl.NewDelayedReliableQueue[[]byte](rt, def, rawCodec{}, key)
	case def.Reliable:
		q = lockimpl.NewReliableQueue[[]byte](rt, def, rawCodec{}, key)
	case def.Delay:
		q = lockimpl.NewDelayedQueue[[]byte](rt, def, rawCodec{}, key)
	default:
		q = lockimpl.NewQueue[[]byte](rt, def, rawCodec{}, key)
	}
	return q, o, key, nil
}

// Redrive puts up to n of a queue's oldest dead letters back on its ready
// list (n <= 0: all of them), through the runtime's Redrive. It returns
// how many it moved, or ErrUnknownObject, ErrBadParams, ErrUnsupported for
// an object that is not a queue, or a Redis error.
func (in *Inspector) Redrive(ctx context.Context, n int, object string, values ...string) (int, error) {
	q, _, key, err := in.runtimeQueue(object, values)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		dead, err := in.rdb.LLen(ctx, keys.Sub(key, "dead")).Result()
		if err != nil {
			return 0, fmt.Errorf("inspect: counting dead letters of %s: %w", key, err)
		}
		if dead == 0 {
			return 0, nil
		}
		n = int(dead)
	}
	return q.Redrive(ctx, n)
}

// pausable is what every runtime queue type offers to pause its
// consumers.
type pausable interface {
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
}

// Pause pauses the consumers of a queue instance, through the runtime's
// Pause: producers keep offering, Takes (and workers) take nothing until
// Resume; waiting Takes keep waiting. Pausing a paused queue changes
// nothing. Of a schedule, it is SetPaused: its ticks are skipped on every
// replica. It returns ErrUnknownObject, ErrBadParams, ErrUnsupported for
// an object that is not a queue, or a Redis error.
func (in *Inspector) Pause(ctx context.Context, object string, values ...string) error {
	if in.isSchedule(object) {
		return in.SetPaused(ctx, true, object)
	}
	q, _, _, err := in.runtimeQueue(object, values)
	if err != nil {
		return err
	}
	return q.(pausable).Pause(ctx)
}

// Resume resumes the consumers of a paused queue instance, through the
// runtime's Resume, waking its waiting Takes. It returns the errors of
// Pause.
func (in *Inspector) Resume(ctx context.Context, object string, values ...string) error {
	if in.isSchedule(object) {
		return in.SetPaused(ctx, false, object)
	}
	q, _, _, err := in.runtimeQueue(object, values)
	if err != nil {
		return err
	}
	return q.(pausable).Resume(ctx)
}

// queueSuffixes are the suffixes of a queue's keys after its ready list
// (runtime/queue.go's queueKeys).
var queueSuffixes = []string{"delayed", "data", "seq", "armed", "proc", "inflight", "att", "dead", "err"}

// Purge deletes every item of a queue: ready, delayed, in flight, dead
// and the completed ones retention kept (one DEL of its keys, which share
// a slot); a pause stays. Deliveries in flight then
// fail their Ack with ErrDeliveryExpired. It reports whether there was
// anything to delete, or returns ErrUnknownObject, ErrBadParams,
// ErrUnsupported for an object that is not a queue, or a Redis error.
// The runtime has no purge; this is the one action that writes keys
// directly.
func (in *Inspector) Purge(ctx context.Context, object string, values ...string) (bool, error) {
	_, _, key, err := in.runtimeQueue(object, values)
	if err != nil {
		return false, err
	}
	ks := []string{key}
	for _, s := range queueSuffixes {
		if s == "seq" {
			continue // ids stay unique across a purge
		}
		ks = append(ks, keys.Sub(key, s))
	}
	ks = append(ks, keys.Sub(key, "done")) // what retention kept; a pause stays
	n, err := in.rdb.Del(ctx, ks...).Result()
	if err != nil {
		return false, fmt.Errorf("inspect: purging %s: %w", key, err)
	}
	return n > 0, nil
}

// SetPermits sets a semaphore's capacity (n > 0) and wakes its waiters,
// through the runtime's SetPermits; n == 0 goes back to the spec's
// permits (ResetPermits). It returns ErrUnknownObject, ErrBadParams,
// ErrUnsupported for an object that is not a semaphore, the runtime's
// ErrInvalidArgument for a negative n, or a Redis error.
func (in *Inspector) SetPermits(ctx context.Context, n int, object string, values ...string) error {
	key, err := in.Key(object, values...)
	if err != nil {
		return err
	}
	o := in.byNm[object]
	sem, ok := o.obj.(*spec.Semaphore)
	if !ok {
		return fmt.Errorf("%w: set-permits of %s, a %s", ErrUnsupported, o.name, o.kind)
	}
	s := lockimpl.NewSemaphore(in.runtimeClient(""), defs.Semaphore(sem), key)
	if n == 0 {
		return s.ResetPermits(ctx)
	}
	return s.SetPermits(ctx, n)
}

// isSchedule reports whether object names a schedule (which Pause and
// Resume pause on every replica).
func (in *Inspector) isSchedule(object string) bool {
	o, err := in.object(object)
	return err == nil && o.kind == KindSchedule
}
