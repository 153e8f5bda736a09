package main

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestDefectsFromEvents feeds the checker a made-up log with one double
// effect of several classes, and one clean hold, and checks its counts.
func TestDefectsFromEvents(t *testing.T) {
	ev := []Event{
		{T: 1, Ev: evSpawn, W: "w0.0"},
		// An Ack that ran twice: "no longer in flight", and the item
		// never came back (counted); another by a consumer stopped past
		// its visibility, after the item came back to another, which
		// acknowledged it (not counted).
		{T: 2, W: "w0.0", Ev: evTake, Obj: objJobs, Msg: "m4", Item: "i4", Att: 1, TCall: 1},
		{T: 3, W: "w0.0", Ev: evAck, Obj: objJobs, Msg: "m4", Item: "i4", Att: 1, TCall: 2, Err: "lockgen: delivery no longer in flight"},
		{T: 4, W: "w1.0", Ev: evTake, Obj: objJobs, Msg: "m5", Item: "i5", Att: 1, TCall: 3},
		{T: 5, W: "w0.0", Ev: evTake, Obj: objJobs, Msg: "m5", Item: "i5", Att: 2, TCall: 4},
		{T: 6, W: "w0.0", Ev: evAck, Obj: objJobs, Msg: "m5", Item: "i5", Att: 2, TCall: 5},
		{T: 7, W: "w1.0", Ev: evAck, Obj: objJobs, Msg: "m5", Item: "i5", Att: 1, TCall: 6, Err: "lockgen: delivery no longer in flight"},
		// A clean hold: 1, 2, 1, 1, then 0 after Unlock.
		{T: 10, W: "w0.0", Ev: evAcq, Obj: objMutex, Hold: "a", TCall: 5},
		{T: 11, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "a", Stage: "lock", N: 1, Alive: true},
		{T: 12, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "a", Stage: "reenter", N: 2, Alive: true},
		{T: 13, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "a", Stage: "inner", N: 1, Alive: true},
		{T: 14, W: "w0.0", Ev: evRel, Obj: objMutex, Hold: "a", Alive: true},
		{T: 15, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "a", Stage: "prerel", N: 1, Alive: true},
		{T: 16, W: "w0.0", Ev: evUnlock, Obj: objMutex, Hold: "a"},
		{T: 17, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "a", Stage: "after", N: 0},
		// The re-entry ran twice: 3 holds, 2 after the inner Unlock, 1 after the outer.
		{T: 20, W: "w0.0", Ev: evAcq, Obj: objMutex, Hold: "b", TCall: 18},
		{T: 21, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "b", Stage: "lock", N: 1, Alive: true},
		{T: 22, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "b", Stage: "reenter", N: 3, Alive: true},
		{T: 23, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "b", Stage: "inner", N: 2, Alive: true},
		{T: 24, W: "w0.0", Ev: evRel, Obj: objMutex, Hold: "b", Alive: true},
		{T: 25, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "b", Stage: "prerel", N: 2, Alive: true},
		{T: 26, W: "w0.0", Ev: evUnlock, Obj: objMutex, Hold: "b"},
		{T: 27, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "b", Stage: "after", N: 1},
		// The inner Unlock ran twice: the outer hold is gone.
		{T: 28, W: "w0.0", Ev: evAcq, Obj: objMutex, Hold: "c", TCall: 27},
		{T: 28, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "c", Stage: "reenter", N: 2, Alive: true},
		{T: 29, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "c", Stage: "inner", N: 0, Alive: true},
		// A latch: the second CountDown counted twice.
		{T: 30, W: "w0.0", Ev: evCountDown, Obj: objLatch, Hold: "l", Att: 1, N: 4},
		{T: 31, W: "w0.0", Ev: evCountDown, Obj: objLatch, Hold: "l", Att: 2, N: 2},
		// An item delivered as attempt 2 with no delivery before it.
		{T: 40, W: "w0.0", Ev: evTake, Obj: objJobs, Msg: "m1", Item: "i1", Att: 2, TCall: 39},
		{T: 41, W: "w0.0", Ev: evAck, Obj: objJobs, Msg: "m1", Item: "i1", Att: 2, TCall: 40},
		// Another, but a worker was killed before it: its first delivery
		// went to the killed worker, which could not log it.
		{T: 42, Ev: evFault, Fault: "kill-consumer", Target: "w1"},
		{T: 43, Ev: evHealed, Fault: "kill-consumer"},
		{T: 45, W: "w0.0", Ev: evTake, Obj: objJobs, Msg: "m2", Item: "i2", Att: 2, TCall: 44},
		{T: 46, W: "w0.0", Ev: evAck, Obj: objJobs, Msg: "m2", Item: "i2", Att: 2, TCall: 45},
		// Another, but a worker was stopped (SIGSTOP) between its claim
		// and its log line: its attempt 1 is logged after attempt 2.
		{T: 50, Ev: evFault, Fault: "sigstop-holder", Target: "w1"},
		{T: 52, W: "w0.0", Ev: evTake, Obj: objJobs, Msg: "m3", Item: "i3", Att: 2, TCall: 51},
		{T: 53, W: "w1.0", Ev: evTake, Obj: objJobs, Msg: "m3", Item: "i3", Att: 1, TCall: 49},
		{T: 54, W: "w0.0", Ev: evAck, Obj: objJobs, Msg: "m3", Item: "i3", Att: 2, TCall: 53},
		// A permit's Release that ran twice: "not held" at once, while it
		// was alive just before (counted); another that a partition held
		// for more than a lease: its permit ran out meanwhile (not counted).
		{T: 47, W: "w0.0", Ev: evRel, Obj: objPermits, Hold: "p1", Alive: true},
		{T: 48, W: "w0.0", Ev: evUnlock, Obj: objPermits, Hold: "p1", Err: "lockgen: permit not held"},
		{T: 49, W: "w0.0", Ev: evRel, Obj: objPermits, Hold: "p2", Alive: true},
		{T: 49 + int64(lease) + 1, Recv: 49 + int64(lease) + 2, W: "w0.0", Ev: evUnlock, Obj: objPermits, Hold: "p2", Err: "lockgen: permit not held"},
		// An outer Unlock that answered "lock lost" although its hold was
		// alive just before and is gone after it (counted); another held
		// by a SIGSTOP for more than a lease: the lease ran out in Redis
		// before the release ran (not counted).
		{T: 60, W: "w0.0", Ev: evAcq, Obj: objMutex, Hold: "d", TCall: 59},
		{T: 61, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "d", Stage: "prerel", N: 1, Alive: true},
		{T: 62, W: "w0.0", Ev: evUnlock, Obj: objMutex, Hold: "d", Err: "lockgen: lock lost"},
		{T: 63, W: "w0.0", Ev: evHolds, Obj: objMutex, Hold: "d", Stage: "after", N: 0},
		{T: 70, W: "w1.0", Ev: evAcq, Obj: objMutex, Hold: "e", TCall: 69},
		{T: 71, W: "w1.0", Ev: evHolds, Obj: objMutex, Hold: "e", Stage: "prerel", N: 1, Alive: true},
		{T: 72, Ev: evFault, Fault: "sigstop-holder", Target: "w1"},
		{T: 72 + int64(lease) + 1, Recv: 72 + int64(lease) + 1, Ev: evHealed, Fault: "sigstop-holder"},
		{T: 72 + int64(lease) + 2, Recv: 72 + int64(lease) + 2, W: "w1.0", Ev: evUnlock, Obj: objMutex, Hold: "e", Err: "lockgen: lock lost"},
		{T: 72 + int64(lease) + 3, Recv: 72 + int64(lease) + 3, W: "w1.0", Ev: evHolds, Obj: objMutex, Hold: "e", Stage: "after", N: 0},
	}
	r := Check(ev)
	for class, want := range map[string]int{
		"reentry-count": 1, "inner-unlock": 1, "held-after-unlock": 1, "latch-double": 1,
		"take-claim-lost": 1, "lock-not-held": 0, "err-unlock": 1, "offer-double": 0, "err-release": 1,
		"err-ack": 1,
	} {
		if got := r.DefectCount(class); got != want {
			t.Errorf("%s = %d, want %d", class, got, want)
		}
	}
}

// TestMutexModel checks porcupine's verdicts on two small mutex histories:
// holds one after the other, and a second acquire that returned while the
// first holder had not called release.
func TestMutexModel(t *testing.T) {
	m := mutexModel.ToModel()
	seq := []porcupine.Operation{
		{ClientId: 0, Input: lockOp{acquire: true, hold: "a"}, Call: 0, Return: 1},
		{ClientId: 1, Input: lockOp{acquire: true, hold: "b"}, Call: 0, Return: 5},
		{ClientId: 0, Input: lockOp{hold: "a", ok: true}, Call: 2, Return: 3},
		{ClientId: 1, Input: lockOp{hold: "b", ok: true}, Call: 6, Return: 7},
	}
	if !porcupine.CheckOperations(m, seq) {
		t.Error("holds one after the other: not linearizable")
	}
	overlap := []porcupine.Operation{
		{ClientId: 0, Input: lockOp{acquire: true, hold: "a"}, Call: 0, Return: 1},
		{ClientId: 1, Input: lockOp{acquire: true, hold: "b"}, Call: 0, Return: 2},
		{ClientId: 0, Input: lockOp{hold: "a", ok: true}, Call: 3, Return: 4},
	}
	if porcupine.CheckOperations(m, overlap) {
		t.Error("two holders at once: linearizable")
	}
}
