package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// nextLeader receives from an Observe channel until it sends a leader
// for which ok holds.
func nextLeader(t *testing.T, ch <-chan lockrt.Leader, ok func(lockrt.Leader) bool, what string) lockrt.Leader {
	t.Helper()
	deadline := time.After(failAfter)
	for {
		select {
		case ld, open := <-ch:
			if !open {
				t.Fatalf("observe closed waiting for %s", what)
			}
			if ok(ld) {
				return ld
			}
		case <-deadline:
			t.Fatalf("observe sent no %s", what)
		}
	}
}

// TestElection: the first campaigner leads, a second one waits in the
// registry and leads when the first resigns, with a larger epoch; an
// observer on a third client sees each term and nobody leading after the
// last leader's campaign context ended (which resigns it).
func TestElection(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		d := def(t, lockrt.Fenced, 2*time.Second, true, 0)
		k := key(t)
		a, bc, obs := namedID(t, b, "a"), namedID(t, b, "b"), newClient(t, b)
		ea, eb, eo := lockrt.NewElection(a.Lock(d, k)), lockrt.NewElection(bc.Lock(d, k)), lockrt.NewElection(obs.Lock(d, k))

		octx, ostop := context.WithCancel(context.Background())
		defer ostop()
		seen := eo.Observe(octx)
		if ld := nextLeader(t, seen, func(lockrt.Leader) bool { return true }, "a first leader"); ld.Leads() {
			t.Fatalf("a leader before any campaign: %+v", ld)
		}

		la, err := ea.Campaign(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if la.Epoch() <= 0 {
			t.Fatalf("epoch %d", la.Epoch())
		}
		ld := nextLeader(t, seen, lockrt.Leader.Leads, "a's term")
		if ld.ID != "a" || ld.Epoch != la.Epoch() || ld.TTL <= 0 {
			t.Fatalf("observed %+v, want a at epoch %d", ld, la.Epoch())
		}
		if cur, err := eb.Leader(context.Background()); err != nil || cur.Owner != ld.Owner {
			t.Fatalf("Leader: %+v, %v; want %+v", cur, err, ld)
		}

		bctx, bstop := context.WithCancel(context.Background())
		defer bstop()
		lb := inBackground(t, func() (*lockrt.Leadership, error) { return eb.Campaign(bctx) })
		waitWaiting(t, bc, k, 1, 1)
		if err := la.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		if cause := context.Cause(la.Context()); !errors.Is(cause, context.Canceled) {
			t.Fatalf("a's context after Resign: %v", cause)
		}
		if err := la.Resign(context.Background()); err != nil {
			t.Fatalf("a second Resign: %v", err)
		}
		var termB *lockrt.Leadership
		select {
		case termB = <-lb:
		case <-time.After(failAfter):
			t.Fatal("b does not lead after a resigned")
		}
		if termB.Epoch() <= la.Epoch() {
			t.Fatalf("b's epoch %d after a's %d", termB.Epoch(), la.Epoch())
		}
		if ld := nextLeader(t, seen, func(l lockrt.Leader) bool { return l.Leads() && l.ID == "b" }, "b's term"); ld.Epoch != termB.Epoch() {
			t.Fatalf("observed %+v, want epoch %d", ld, termB.Epoch())
		}

		bstop() // b's campaign context ends: it resigns
		<-termB.Context().Done()
		nextLeader(t, seen, func(l lockrt.Leader) bool { return !l.Leads() }, "nobody leading")
		if cur, err := ea.Leader(context.Background()); err != nil || cur.Leads() {
			t.Fatalf("Leader after b's campaign ended: %+v, %v", cur, err)
		}
	})
}

// TestElectionLost: a leader whose lock is taken from it (force-unlocked
// here; a lease that ran out is the same) sees its context end with
// ErrLockLost at its next renewal, and a campaigner leads with a larger
// epoch.
func TestElectionLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const lease = 900 * time.Millisecond // renewed every 300ms
		d := def(t, lockrt.Fenced, lease, true, 0)
		k := key(t)
		a, other := newClient(t, b), newClient(t, b)
		ea, eo := lockrt.NewElection(a.Lock(d, k)), lockrt.NewElection(other.Lock(d, k))
		la, err := ea.Campaign(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := eo.Lock().ForceUnlock(context.Background()); err != nil || !ok {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		lo, err := eo.Campaign(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-la.Context().Done():
		case <-time.After(failAfter):
			t.Fatal("the deposed leader's context did not end")
		}
		if cause := context.Cause(la.Context()); !errors.Is(cause, lockrt.ErrLockLost) {
			t.Fatalf("cause %v, want ErrLockLost", cause)
		}
		if lo.Epoch() <= la.Epoch() {
			t.Fatalf("epoch %d after %d", lo.Epoch(), la.Epoch())
		}
		if err := la.Resign(context.Background()); !errors.Is(err, lockrt.ErrLockLost) {
			t.Fatalf("Resign of a lost term: %v, want ErrLockLost", err)
		}
		if err := lo.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		var nilTerm *lockrt.Leadership
		if err := nilTerm.Resign(context.Background()); !errors.Is(err, lockrt.ErrNotHeld) {
			t.Fatalf("nil Resign: %v", err)
		}
	})
}

// namedID returns a client over b whose id is id.
func namedID(t testing.TB, b backend, id string) *lockrt.Client {
	rdb := b.new()
	c := lockrt.New(rdb, lockrt.WithID(id))
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c
}
