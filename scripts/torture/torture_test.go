package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain doubles as the worker: the harness starts this test binary
// again with TORTURE_WORKER=1 for each worker process.
func TestMain(m *testing.M) {
	if os.Getenv("TORTURE_WORKER") == "1" {
		if err := workerMain(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "torture worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// shortFaults is the short mode's schedule: one of each fault that hits a
// holder, a consumer, the pub/sub connections, all connections, and Redis.
var shortFaults = []string{
	"sigstop-holder", "kill-holder", "kill-consumer", "client-kill-pubsub",
	"proxy-cut", "partition-holder", "lose-replies", "redis-restart",
}

// fixedClasses lists the double-effect classes (defectClasses in
// defects.go) that the runtime on main is held to: the test fails when one
// of them counts anything outside an empty Redis restart's window. The
// others are logged (the table shows them). Issue 25: every class, since
// the exactly-once scripts landed (0 of each at 5% lost replies).
var fixedClasses = []string{
	"lock-not-held", "lock-extra-holds", "reentry-count", "inner-unlock", "held-after-unlock",
	"overlap", "write-after-acquire", "latch-double", "latch-early", "permits-extra",
	"permits-counted-twice", "offer-double", "take-claim-lost", "delivered-after-ack",
	"err-unlock", "err-release", "err-ack", "err-countdown",
}

// doubleEffectRows are the faults whose overlaps and writes after lease
// end come from commands run twice: the test holds them to 0 only once
// the classes "overlap" and "write-after-acquire" are in fixedClasses.
var doubleEffectRows = map[string]bool{"lose-replies": true}

// knownFailing lists, per fault, the invariants that the runtime on main
// is known to break, with the item of issue 10 that fixes each: the test
// logs them instead of failing (the long mode shows them in its table
// either way), and when a fix lands its line goes, so that the test holds
// the runtime to it. Empty since 94d0729. It listed: recovery after
// partition-holder, client-kill-pubsub and redis-restart (waiters parked
// in the hub's subscribe for good; item 5, fixed by f8a3aed), and overlaps
// and writes after lease end after sigstop-holder (Err() reported a lease
// alive after a pause past it, in 2 to 3 of 8 pauses; item 4, fixed by
// 94d0729).
var knownFailing = map[string]map[string]string{}

// TestTortureShort runs 4 worker processes through one of each short-mode
// fault and asserts the invariants: no overlapping holds, no write after
// the lease ended while Err()==nil, no semaphore over-admission (all
// outside faults that may break them legitimately: an empty restart of a
// Redis without persistence), no lost reliable message, and every live worker taking every object again after each
// fault before the next one begins.
func TestTortureShort(t *testing.T) {
	cfg := Config{
		Workers: 4, Faults: shortFaults, Rounds: 1,
		Warmup: 1500 * time.Millisecond, Settle: 4 * time.Second, // recovery after a kill takes a lease (2s) and more under load
		LoseRate: 0.05, LoseFor: 10 * time.Second,
		Dir: logDir(t),
		Worker: func(args ...string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), "TORTURE_WORKER=1")
			return cmd
		},
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	events, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := Check(events)
	var table strings.Builder
	r.Print(&table)
	t.Logf("\n%s", table.String())

	check := func(fault, invariant string, n int) {
		t.Helper()
		if n == 0 {
			return
		}
		if why, ok := knownFailing[fault][invariant]; ok {
			t.Logf("known failure: %s: %d × %s (%s)", fault, n, invariant, why)
			return
		}
		t.Errorf("%s: %d × %s", fault, n, invariant)
	}
	seen := map[string]bool{}
	for _, rw := range r.Rows {
		seen[rw.Fault] = true
		if rw.Holds[0] == 0 || rw.Holds[1] == 0 || rw.Holds[2] == 0 {
			t.Errorf("%s: holds mutex/fenced/permits = %v: some object was never taken", rw.Fault, rw.Holds)
		}
		check(rw.Fault, "over-admission", rw.OverAdmitted)
		if rw.Unsafe {
			continue
		}
		if !doubleEffectRows[rw.Fault] || slices.Contains(fixedClasses, "overlap") {
			check(rw.Fault, "overlap", rw.Overlaps[0]+rw.Overlaps[1])
		}
		if !doubleEffectRows[rw.Fault] || slices.Contains(fixedClasses, "write-after-acquire") {
			check(rw.Fault, "write after lease end", rw.LateAfterEnd[0]+rw.LateAfterEnd[1])
		}
		check(rw.Fault, "fence order", rw.FenceOrder)
		check(rw.Fault, "fresh holder refused", rw.Refused)
	}
	for _, c := range defectClasses {
		n := r.DefectCount(c.id)
		if paused := r.Defects[c.id]["sigstop-holder"]; paused > 0 && strings.HasPrefix(c.id, "err-") {
			// A worker stopped in the middle of a release for longer than
			// the release's timeout (ReleaseTimeout, 5 s) cannot learn its
			// outcome in time: it reports ErrNotReleased, as documented
			// for a Redis it could not reach; not a double effect.
			t.Logf("%s under sigstop-holder: %d (a release paused past its timeout)", c.id, paused)
			n -= paused
		}
		switch {
		case n > 0 && slices.Contains(fixedClasses, c.id):
			t.Errorf("double effect %s: %d (%s)", c.id, n, c.about)
		case n > 0:
			t.Logf("known double effect (issue 25 item 7, not in fixedClasses): %s: %d", c.id, n)
		}
	}
	for _, l := range r.Linear {
		t.Logf("porcupine: %s: %s: %s", l.Window, l.Object, l.Result)
	}
	for _, w := range r.Windows {
		if w.recoverAll < 0 {
			check(w.kind, "recovery", len(w.missing))
		}
	}
	for _, f := range shortFaults {
		if !seen[f] {
			t.Errorf("fault %s was not injected", f)
		}
	}
	// A message whose every Ack failed (ErrDeliveryExpired, or a network
	// error early enough for a redelivery: ackFailed) and that never came
	// back was processed, and most likely acknowledged by an Ack whose reply
	// was lost: a misleading error, not a loss. It is logged, and the table
	// shows it (err-ack).
	if n := len(r.Lost) - len(r.AckExpiredGone); n > 0 {
		t.Errorf("%d reliable messages lost: %v", n, r.Lost)
	} else if n := len(r.AckExpiredGone); n > 0 {
		t.Logf("known failure: %d messages whose Ack failed never came back: %v", n, r.AckExpiredGone)
	}
	// Duplicates are within a reliable queue's contract (at least once):
	// the table reports them, the test does not fail on them.
	if r.Acked == 0 {
		t.Error("no message was acknowledged")
	}
	// The schedule: every tick once, none missed outside an empty Redis
	// restart's window.
	if r.TickDups > 0 || r.TickMissed > 0 || r.BadTicks > 0 || r.Ticks == 0 {
		t.Errorf("schedule: %d ticks, %d fired twice, %d missed, %d not ticks", r.Ticks, r.TickDups, r.TickMissed, r.BadTicks)
	}
}

// logDir is a directory for the run's logs, removed when the test passes
// and kept (its path logged) when it fails.
func logDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "torture-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("events.jsonl and workers.log kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}
