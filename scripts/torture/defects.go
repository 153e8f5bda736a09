package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Double effects: what a command that Redis ran twice (its reply lost, the
// command sent again by go-redis or by the runtime's own retry) does to
// each object, counted from what the workers read straight from Redis
// right after their calls (hold counts, semaphore counts, latch counts)
// and from the deliveries the queue made. Each class is a defect of the
// runtime when its count is not 0; the short test asserts 0 for the
// classes in fixedClasses (torture_test.go).
var defectClasses = []struct{ id, about string }{
	{"lock-not-held", "mutex: Lock returned a live lease, Redis holds it 0 times (a new owner's duplicate-hold clean-up ran twice)"},
	{"lock-extra-holds", "mutex: after a new owner's Lock, Redis counts more than 1 hold"},
	{"reentry-count", "mutex: hold count after the re-entry is not 2 (it ran twice: 3)"},
	{"inner-unlock", "mutex: the inner Unlock returned nil and did not leave one hold less than the re-entry (it ran twice: 0, the outer hold is gone)"},
	{"held-after-unlock", "mutex: still held by its owner after both Unlocks returned nil"},
	{"overlap", "mutex/fenced: overlaps, two holders saw their lease alive at one instant (table above)"},
	{"write-after-acquire", "mutex/fenced: writes under a live lease after another process acquired (table above)"},
	{"latch-double", "latch: one CountDown counted more than once (count in Redis below 5 - count-downs)"},
	{"latch-early", "latch: open (0) before its 5th CountDown"},
	{"permits-extra", "semaphore: after Acquire(1), Redis counts more than 1 permit for the caller"},
	{"permits-counted-twice", "semaphore: after an Acquire(1), Redis's total ('*') exceeds the owners' permits by more than it did before"},
	{"offer-double", "queue: one Offer enqueued more than one item (one message delivered as two items)"},
	{"take-claim-lost", "queue: an item delivered as attempt k with fewer than k-1 deliveries before it (a Take ran twice: its first claim sat in flight)"},
	{"delivered-after-ack", "queue: an item delivered again after its Ack returned nil"},
	{"err-unlock", "errors after success: Unlock (inner or outer) returned an error, yet its release happened"},
	{"err-release", "errors after success: Release returned ErrPermitNotHeld while the permit was alive just before, so the release happened"},
	{"err-ack", "errors after success: Ack answered \"no longer in flight\" (or a network error, 2 visibility timeouts before the end), and the item never came back"},
	{"err-countdown", "errors after success: CountDown returned an error, yet the count went down by one"},
}

// defects counts the classes by window (fault kind) into r.Defects.
func (r *Report) defects(events []Event) {
	r.Defects = map[string]map[string]int{}
	add := func(class string, t int64, n int) {
		if n <= 0 {
			return
		}
		if r.Defects[class] == nil {
			r.Defects[class] = map[string]int{}
		}
		r.Defects[class][r.kindAt(t)] += n
	}
	for _, rw := range r.Rows {
		if rw.Unsafe {
			continue
		}
		if n := rw.Overlaps[0] + rw.Overlaps[1]; n > 0 {
			r.addRow("overlap", rw.Fault, n)
		}
		if n := rw.LateAfterEnd[0] + rw.LateAfterEnd[1]; n > 0 {
			r.addRow("write-after-acquire", rw.Fault, n)
		}
	}

	type mutexHold struct {
		reenter, prerel int  // counts read after the re-entry, before the outer Unlock (-1: not read)
		prerelAlive     bool // the lease was alive after that read
		// prerelAt, unlockAt: when that read was logged, and when the outer
		// Unlock returned (it was called in between)
		prerelAt, unlockAt int64
		unlockErr          string
		unlocked           bool
	}
	mutex := map[string]*mutexHold{}
	permitAlive := map[string]bool{}
	permitRel := map[string]int64{} // when Release was called, by hold
	type latch struct{ prev, early int }
	latches := map[string]*latch{}
	var permitSnaps []Event
	for _, e := range events {
		switch {
		case e.Ev == evAcq && e.Obj == objMutex:
			mutex[e.Hold] = &mutexHold{reenter: -1, prerel: -1}
		case e.Ev == evHolds && e.Obj == objMutex:
			h := mutex[e.Hold]
			if h == nil || e.N < 0 {
				continue
			}
			switch e.Stage {
			case "lock":
				if e.Alive && e.N == 0 {
					add("lock-not-held", e.T, 1)
				}
				if e.N > 1 {
					add("lock-extra-holds", e.T, 1)
				}
			case "reenter":
				if e.Err == "" {
					h.reenter = e.N
					if e.Alive && e.N != 2 {
						add("reentry-count", e.T, 1)
					}
				}
			case "inner":
				if e.Err == "" && e.Alive && h.reenter > 0 && e.N != h.reenter-1 {
					add("inner-unlock", e.T, 1)
				}
				if e.Err != "" && h.reenter > 0 && e.N == h.reenter-1 {
					add("err-unlock", e.T, 1)
				}
			case "prerel":
				h.prerel, h.prerelAlive, h.prerelAt = e.N, e.Alive, e.T
			case "after":
				if h.unlocked && h.unlockErr == "" && e.N > 0 {
					add("held-after-unlock", e.T, 1)
				}
				// An outer Unlock that failed while the hold it released
				// is gone: its release ran, unless the call took a lease
				// or more (a SIGSTOP, a partition held it): the lease
				// could run out in Redis before the release ran, and
				// "lock lost" is then the truth (as for err-release).
				if h.unlocked && h.unlockErr != "" && h.prerelAlive && h.prerel >= 1 && e.N == h.prerel-1 &&
					h.unlockAt-h.prerelAt < int64(lease) {
					add("err-unlock", e.T, 1)
				}
			}
		case e.Ev == evUnlock && e.Obj == objMutex:
			if h := mutex[e.Hold]; h != nil {
				h.unlocked, h.unlockErr, h.unlockAt = true, e.Err, e.T
			}
		case e.Ev == evRel && e.Obj == objPermits:
			permitAlive[e.Hold] = e.Alive
			permitRel[e.Hold] = e.T
		case e.Ev == evUnlock && e.Obj == objPermits:
			// "permit not held" while the permit was alive (renewed, its
			// context not ended) just before: Redis had it, so this call
			// released it (a network error says nothing either way) --
			// unless the call took a lease or more (a partition, a pause
			// held it): the permit's lease could run out in Redis before
			// the release ran, and "not held" is then the truth.
			if strings.Contains(e.Err, "not held") && permitAlive[e.Hold] && e.T-permitRel[e.Hold] < int64(lease) {
				add("err-release", e.T, 1)
			}
		case e.Ev == evHolds && e.Obj == objPermits:
			if e.N > 1 {
				add("permits-extra", e.T, 1)
			}
			if e.N >= 0 {
				permitSnaps = append(permitSnaps, e)
			}
		case e.Ev == evCountDown:
			l := latches[e.Hold]
			if l == nil {
				l = &latch{prev: 5}
				latches[e.Hold] = l
			}
			if e.N < 0 || l.prev < 0 { // a read failed: no comparison until the next read
				l.prev = e.N
				continue
			}
			want := max(l.prev-1, 0)
			switch {
			case e.N < want:
				add("latch-double", e.T, want-e.N)
			case e.N == want && e.Err != "" && l.prev > 0:
				add("err-countdown", e.T, 1)
			}
			if e.N == 0 && e.Att < 5 && l.early == 0 {
				l.early = 1
				add("latch-early", e.T, 1)
			}
			l.prev = e.N
		}
	}
	// Rises of the semaphore's unexplained total, in time order.
	sort.SliceStable(permitSnaps, func(i, j int) bool { return permitSnaps[i].T < permitSnaps[j].T })
	extra := 0
	for _, e := range permitSnaps {
		if e.Extra > extra {
			add("permits-counted-twice", e.T, e.Extra-extra)
		}
		extra = e.Extra
	}

	// The queue, by item.
	var last int64
	if len(events) > 0 {
		last = events[len(events)-1].Recv
	}
	items := map[string][]Event{} // item -> its takes and acks, in log order
	msgItems := map[string]map[string]bool{}
	// A worker killed between its Take's claim and its log line leaves a
	// delivery unlogged, and one stopped there (SIGSTOP) logs it late,
	// after the delivery that followed when its visibility ran out: a gap
	// in attempts spanning such a kill or stop is not a Take that ran
	// twice.
	var kills []int64
	for _, e := range events {
		if e.Ev == evFault && (e.Fault == "kill-holder" || e.Fault == "kill-consumer" || e.Fault == "sigstop-holder") {
			kills = append(kills, e.T)
		}
	}
	killedBetween := func(from, to int64) bool {
		return slices.ContainsFunc(kills, func(t int64) bool { return t >= from && t <= to })
	}
	for _, e := range events {
		if e.Obj != objJobs || (e.Ev != evTake && e.Ev != evAck) {
			continue
		}
		items[e.Item] = append(items[e.Item], e)
		if e.Ev == evTake {
			if msgItems[e.Msg] == nil {
				msgItems[e.Msg] = map[string]bool{}
			}
			if !msgItems[e.Msg][e.Item] && len(msgItems[e.Msg]) > 0 {
				add("offer-double", e.T, 1)
			}
			msgItems[e.Msg][e.Item] = true
		}
	}
	for _, evs := range items {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].T < evs[j].T })
		takes, missing := 0, 0
		var ackedAt, prevTake int64
		for _, e := range evs {
			switch e.Ev {
			case evTake:
				if m := e.Att - 1 - takes; m > missing {
					if !killedBetween(prevTake, e.T) {
						add("take-claim-lost", e.T, m-missing)
					}
					missing = m
				}
				prevTake = e.T
				if ackedAt > 0 && ackedAt < e.TCall {
					add("delivered-after-ack", e.T, 1)
				}
				takes++
			case evAck:
				if e.Err == "" && ackedAt == 0 {
					ackedAt = e.T
				}
				// (Came back: delivered again as a later attempt, also
				// before this Ack returned: a consumer stopped past its
				// visibility acknowledges late, and rightly fails.)
				if ackFailed(e, last) && !slices.ContainsFunc(evs, func(x Event) bool { return x.Ev == evTake && x.Att > e.Att }) {
					add("err-ack", e.T, 1)
				}
			}
		}
	}
}

// addRow adds n to class in the window kind.
func (r *Report) addRow(class, kind string, n int) {
	if r.Defects[class] == nil {
		r.Defects[class] = map[string]int{}
	}
	r.Defects[class][kind] += n
}

// kindAt is the fault kind of the window t falls in ("none" outside).
func (r *Report) kindAt(t int64) string {
	for i := len(r.Windows) - 1; i >= 0; i-- {
		if w := r.Windows[i]; t >= w.start && t < w.end {
			return w.kind
		}
	}
	return "none"
}

// DefectCount is class's count outside the unsafe faults' windows.
func (r *Report) DefectCount(class string) int {
	n := 0
	for kind, c := range r.Defects[class] {
		if !faultKinds[kind].unsafe {
			n += c
		}
	}
	return n
}

// printDefects writes the double-effect table: one row per class, its
// count outside unsafe faults, and where it was found.
func (r *Report) printDefects(w io.Writer) {
	fmt.Fprintln(w, "\n| double effect | n | by fault |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, c := range defectClasses {
		var where []string
		for kind, n := range r.Defects[c.id] {
			name := kind
			if faultKinds[kind].unsafe {
				name += " (*)"
			}
			where = append(where, fmt.Sprintf("%s %d", name, n))
		}
		slices.Sort(where)
		fmt.Fprintf(w, "| %s: %s | %d | %s |\n", c.id, c.about, r.DefectCount(c.id), strings.Join(where, ", "))
	}
}
