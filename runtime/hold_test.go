package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

type holdTestKey struct{}

// TestHoldContextLazy: a hold's context that ended before anything made
// its inner context (Done, Value, AfterFunc) reports the end as a
// cancel-cause context would: Err, a closed Done, context.Cause, the
// owner and the parent's values, and context.AfterFunc runs.
func TestHoldContextLazy(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), holdTestKey{}, "v"))
	var c holdContext
	c.withOwner("me")
	c.init(parent, false, time.Now().Add(time.Hour), ErrLockLost)
	cancelParent() // without WithParentCancel: does not end the hold
	if c.Err() != nil || c.lostCause() {
		t.Fatalf("Err %v lost %v before the end", c.Err(), c.lostCause())
	}
	if c.Value(ownerKey{}) != "me" || c.Value(holdTestKey{}) != "v" {
		t.Fatalf("values %v %v", c.Value(ownerKey{}), c.Value(holdTestKey{}))
	}
	c.end(ErrLockLost)
	c.end(nil) // the first end's cause stays
	if !errors.Is(c.Err(), context.Canceled) || !c.lostCause() {
		t.Fatalf("Err %v lost %v after the end", c.Err(), c.lostCause())
	}
	var d holdContext
	d.init(context.Background(), false, time.Now().Add(time.Hour), ErrLockLost)
	d.end(ErrLockLost) // before Done or Value made the inner context
	select {
	case <-d.Done():
	default:
		t.Fatal("Done not closed after the end")
	}
	if got := context.Cause(&d); !errors.Is(got, ErrLockLost) {
		t.Fatalf("Cause %v, want ErrLockLost", got)
	}
	ran := make(chan struct{})
	context.AfterFunc(&d, func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(time.Second):
		t.Fatal("AfterFunc did not run")
	}
	// Past its local deadline it ends with its cause, lazily too.
	var e holdContext
	e.init(context.Background(), false, time.Now().Add(-time.Millisecond), ErrPermitLost)
	if e.Err() == nil || !errors.Is(context.Cause(&e), ErrPermitLost) {
		t.Fatalf("past its deadline: Err %v Cause %v", e.Err(), context.Cause(&e))
	}
}

// TestReleaseContext: a release's context keeps the caller's values, not
// its cancellation or its cause, and has a deadline about ReleaseTimeout
// away with a Done channel.
func TestReleaseContext(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), holdTestKey{}, "v"))
	cancel(errors.New("caller's cause"))
	ctx, done := releaseContext(parent)
	defer done()
	if ctx.Err() != nil || context.Cause(ctx) != nil || ctx.Value(holdTestKey{}) != "v" {
		t.Fatalf("Err %v Cause %v value %v", ctx.Err(), context.Cause(ctx), ctx.Value(holdTestKey{}))
	}
	d, ok := ctx.Deadline()
	if left := time.Until(d); !ok || left < ReleaseTimeout-time.Second || left > ReleaseTimeout+releaseSlot {
		t.Fatalf("deadline in %v (%v), want about %v", left, ok, ReleaseTimeout)
	}
	select {
	case <-ctx.Done():
		t.Fatal("Done closed before the deadline")
	default:
	}
	// A child of it is cancelled by its own cancel, not the caller's.
	child, cancelChild := context.WithCancel(ctx)
	if child.Err() != nil {
		t.Fatal("child cancelled by the caller's cancellation")
	}
	cancelChild()
	// The deadline closes Done with DeadlineExceeded.
	rd := &releaseDeadline{at: time.Now(), done: make(chan struct{})}
	close(rd.done)
	if err := (&releaseCtx{values: parent, slot: rd}).Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the deadline: %v", err)
	}
}
