package main

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability of the recorded histories, checked with porcupine (the
// checker etcd uses) in every lose-replies window and, as a control, in
// the warm-up before the first fault: each operation is the
// interval from its call to its return (CLOCK_MONOTONIC stamps of the
// worker that made it), and porcupine looks for one order of them,
// consistent with those intervals, that a small sequential model accepts.
//
//   - mutex: a register of its holder. acquire(h) needs it free; a release
//     that returned nil needs h to hold it; one that failed may or may not
//     have released.
//   - semaphore: a counter bounded by its 3 permits.
//   - queue: a multiset, partitioned by message: an offer adds a ready
//     copy (a failed offer may have), a take moves a ready copy in flight
//     or redelivers one in flight, an Ack that returned nil removes one in
//     flight (a failed Ack may have).
//
// The operations are the acquisitions and offers called and returned in
// the window (the next fault begins at its end: a lease that runs out
// while its holder is stopped breaks the register model by design), with
// the releases, takes and acks that follow them wherever they fall; what
// was held or queued before the window, or taken after it, is left out,
// which only makes the models more permissive. A history that
// is not linearizable is a safety defect; one porcupine could not decide
// within linearTimeout is "unknown".

// linearTimeout bounds each check.
var linearTimeout = 10 * time.Second

// Linearity is porcupine's verdict on one object's history in one window.
type Linearity struct {
	Window string // "<fault> at <s>s"
	Object string
	Ops    int
	Result porcupine.CheckResult
}

type lockOp struct {
	acquire bool
	hold    string
	ok      bool // release: returned nil
}

// mutexModel is a register of the mutex's holder ("" when free).
var mutexModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{""} },
	Step: func(state, input, _ any) []any {
		holder, op := state.(string), input.(lockOp)
		switch {
		case op.acquire && holder == "":
			return []any{op.hold}
		case op.acquire:
			return nil
		case op.ok && holder == op.hold:
			return []any{""}
		case op.ok:
			return nil
		case holder == op.hold: // a failed release: done or not
			return []any{"", holder}
		}
		return []any{holder}
	},
}

// semModel is the semaphore's count of permits held.
var semModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{0} },
	Step: func(state, input, _ any) []any {
		held, op := state.(int), input.(lockOp)
		switch {
		case op.acquire && held < permits:
			return []any{held + 1}
		case op.acquire:
			return nil
		case op.ok && held > 0:
			return []any{held - 1}
		case op.ok:
			return nil
		case held > 0:
			return []any{held - 1, held}
		}
		return []any{held}
	},
}

type queueOp struct {
	kind string // evOffer | evTake | evAck
	msg  string
	ok   bool
}

// queueState is one message's copies: ready, and in flight.
type queueState struct{ ready, flight int }

var queueModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			m := op.Input.(queueOp).msg
			if by[m] == nil {
				order = append(order, m)
			}
			by[m] = append(by[m], op)
		}
		var parts [][]porcupine.Operation
		for _, m := range order {
			parts = append(parts, by[m])
		}
		return parts
	},
	Init: func() []any { return []any{queueState{}} },
	Step: func(state, input, _ any) []any {
		s, op := state.(queueState), input.(queueOp)
		var next []any
		switch op.kind {
		case evOffer:
			next = append(next, queueState{s.ready + 1, s.flight})
			if !op.ok {
				next = append(next, s)
			}
		case evTake:
			if s.ready > 0 {
				next = append(next, queueState{s.ready - 1, s.flight + 1})
			}
			if s.flight > 0 { // redelivered after its visibility ran out
				next = append(next, s)
			}
		case evAck:
			if s.flight > 0 {
				next = append(next, queueState{s.ready, s.flight - 1})
			}
			if !op.ok {
				next = append(next, s)
			}
		}
		return next
	},
}

// linearizable checks the histories of each lose-replies window.
func (r *Report) linearizable(events []Event) {
	// The warm-up before the first fault is the control: no fault, so
	// every history must be linearizable there.
	type span struct {
		name       string
		start, end int64
	}
	var spans []span
	if len(r.Windows) > 0 {
		spans = append(spans, span{"warm-up (no fault)", r.start, r.Windows[0].start})
	}
	for _, w := range r.Windows {
		if faultKinds[w.kind].continuous {
			spans = append(spans, span{fmt.Sprintf("%s at %.0fs", w.kind, time.Duration(w.start-r.start).Seconds()), w.start, w.end})
		}
	}
	for _, w := range spans {
		name := w.name
		in := func(t int64) bool { return t >= w.start && t < w.end }
		hist := map[string][]porcupine.Operation{}
		open := map[string]*porcupine.Operation{} // hold -> its pending release
		client := map[string]int{}
		id := func(worker string) int {
			if _, ok := client[worker]; !ok {
				client[worker] = len(client)
			}
			return client[worker]
		}
		for _, e := range events {
			switch {
			case e.Ev == evAcq && (e.Obj == objMutex || e.Obj == objPermits) && in(e.TCall) && in(e.T):
				hist[e.Obj] = append(hist[e.Obj], porcupine.Operation{ClientId: id(e.W), Input: lockOp{acquire: true, hold: e.Hold}, Call: e.TCall, Return: e.T})
				open[e.Hold] = &porcupine.Operation{ClientId: id(e.W), Call: -1, Metadata: e.Obj}
			case e.Ev == evRel && open[e.Hold] != nil:
				open[e.Hold].Call = e.T
			case e.Ev == evUnlock && open[e.Hold] != nil && open[e.Hold].Call >= 0:
				op := open[e.Hold]
				op.Input, op.Return = lockOp{hold: e.Hold, ok: e.Err == ""}, e.T
				hist[e.Obj] = append(hist[e.Obj], *op)
				delete(open, e.Hold)
			case e.Obj == objJobs && (e.Ev == evOffer || e.Ev == evTake || e.Ev == evAck) && e.TCall > 0:
				if e.Ev == evOffer && !(in(e.TCall) && in(e.T)) {
					continue
				}
				hist[objJobs] = append(hist[objJobs], porcupine.Operation{ClientId: id(e.W), Input: queueOp{kind: e.Ev, msg: e.Msg, ok: e.Err == ""}, Call: e.TCall, Return: e.T})
			}
		}
		// A release that never returned (the worker was killed) may take
		// effect at any time after its call.
		for hold, op := range open {
			if op.Call >= 0 {
				op.Input, op.Return = lockOp{hold: hold}, math.MaxInt64
				hist[op.Metadata.(string)] = append(hist[op.Metadata.(string)], *op)
			}
		}
		// The queue's history: only the messages offered in the window.
		offered := map[string]bool{}
		for _, op := range hist[objJobs] {
			if q := op.Input.(queueOp); q.kind == evOffer {
				offered[q.msg] = true
			}
		}
		var jobs []porcupine.Operation
		for _, op := range hist[objJobs] {
			if offered[op.Input.(queueOp).msg] {
				jobs = append(jobs, op)
			}
		}
		for _, c := range []struct {
			obj   string
			model porcupine.NondeterministicModel
			ops   []porcupine.Operation
		}{
			{objMutex, mutexModel, hist[objMutex]},
			{objPermits, semModel, hist[objPermits]},
			{objJobs, queueModel, jobs},
		} {
			res := porcupine.CheckOperationsTimeout(c.model.ToModel(), c.ops, linearTimeout)
			r.Linear = append(r.Linear, Linearity{Window: name, Object: c.obj, Ops: len(c.ops), Result: res})
		}
	}
}

func (r *Report) printLinear(w io.Writer) {
	if len(r.Linear) == 0 {
		return
	}
	fmt.Fprintf(w, "\nlinearizability (porcupine, %v per check):\n", linearTimeout)
	for _, l := range r.Linear {
		verdict := map[porcupine.CheckResult]string{porcupine.Ok: "linearizable", porcupine.Illegal: "NOT linearizable", porcupine.Unknown: "unknown (timeout)"}[l.Result]
		fmt.Fprintf(w, "- %s: %s (%d operations): %s\n", l.Window, l.Object, l.Ops, verdict)
	}
}
