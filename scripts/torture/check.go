package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The checker merges the log of a run (the harness's and every worker's
// events, all stamped with one clock, mono) and counts, per fault kind,
// what must not happen. Every count is a lower bound: an event is only
// counted when the stamps prove it, never on a guess.
//
//   - overlap: two holds of one lock (or more holds of the semaphore than
//     it has permits) whose holders all saw their lease alive at one
//     instant: hold B was acquired (B's stamp is taken after Lock
//     returned, so the grant came before it) before A's last check of
//     lease.Context().Err()==nil (A's stamp is taken before the check).
//   - write after lease end: a write made after such a check of A, when
//     B had the lock already.
//   - late write: a write that reached the storage after a write of a
//     later hold, although its holder checked its lease in time (it was
//     stopped between check and write). A plain lock cannot prevent it;
//     the fenced lock's storage rejects it by token.
//   - fence order: a hold that certainly came after another (its Lock
//     was called after the other's returned) has a smaller or equal token.
//   - lost message: offered (Offer returned nil) and never acknowledged.
//   - recovery: after a fault healed, how long until the lock was taken
//     again, and until every live worker took it again.
//
// Counts fall into the window of the fault that began last before them
// (until the next fault begins); "none" is before the first fault and the
// drain at the end.

// window is one fault's stretch of the run.
type window struct {
	kind         string
	target       string
	start, heal  int64
	end          int64 // the next fault's start, or the end of the run
	unsafe       bool
	recoverLock  time.Duration // until the mutex was taken again (-1: never)
	recoverAll   time.Duration // until every live worker took mutex, fenced lock and a permit again (-1: not all)
	recoverQueue time.Duration // until a message was acknowledged again (-1: never)
	missing      []string      // worker/object pairs that did not take it again
	carried      []string      // of those, stuck since an earlier window already
}

// Row is the table's line for one fault kind.
type Row struct {
	Fault  string
	Unsafe bool
	N      int // occurrences

	Holds        [3]int // mutex, fenced, permits
	Overlaps     [2]int // mutex, fenced (pairs of holds)
	LateAfterEnd [2]int // writes after lease end with Err()==nil: mutex, fenced
	HeldAfter    [2]int // stalls: Unlock returned nil, yet the next holder waited most of a lease after it
	Late         int    // mutex: late writes the storage accepted
	Rejected     int    // fenced: stale writes the storage rejected
	Refused      int    // fenced: writes of the newest holder rejected (token went backwards)
	FenceOrder   int
	OverAdmitted int // acquisitions that made more holders than permits
	Redelivered  int // deliveries of a message after its first

	Recovered     int           // occurrences where all recovered within lease+1s
	WorstLock     time.Duration // -1: some occurrence never
	WorstAll      time.Duration // -1: some occurrence not all
	WorstQueue    time.Duration
	recoveredSeen bool
}

// Report is the checker's result for one run.
type Report struct {
	Rows     []*Row
	Windows  []window
	Duration time.Duration
	Workers  int
	start    int64

	Offered, OfferFailed, Acked int
	Lost                        []string // offered, never acknowledged, not explained by an empty restart
	AckExpiredGone              []string // of Lost: every Ack failed (ackFailed), yet it never came back
	LostInRestart               int      // offered before an empty Redis restart, never acknowledged
	DupAcks                     int      // messages acknowledged more than once
	DupCopies                   int      // of those, as different items: the offer landed twice
	AckedUnoffered              int      // acknowledged although the offer reported an error
	Redelivered                 int
	Restarts                    int
	FenceResets                 int // fenced Lock calls answered ErrFenceReset (the counter went back)

	// The schedule Tick (evTick): ticks drained from its queue, ticks
	// found twice, ticks missing between the first and the last, and of
	// those the ones whose time falls in an empty Redis restart's window
	// (from 1s before the kill to 3s after the restart: its items, and
	// the schedule's state, were lost with it).
	Ticks, TickDups, TickMissed, TickMissedInRestart int
	BadTicks                                         int // items that were not a tick

	Defects map[string]map[string]int // double-effect class -> fault kind -> count (defects.go)
	Linear  []Linearity               // porcupine's verdicts (linear.go)
}

type hold struct {
	id, w, obj  string
	tcall, tacq int64
	token       int64
	lastAlive   int64   // the last stamp with Err()==nil (0: none)
	unlocked    int64   // when Unlock returned nil (0: it did not)
	writes      []Event // in order
}

// Check merges the events of a run and counts.
func Check(events []Event) *Report {
	r := &Report{}
	var faultStarts []int
	workers := map[string]bool{}
	for i, e := range events {
		switch e.Ev {
		case evFault:
			faultStarts = append(faultStarts, i)
		case evSpawn:
			workers[e.W] = true
		}
	}
	// Windows.
	last := int64(0)
	first := int64(0)
	if len(events) > 0 {
		first = events[0].Recv
		last = events[len(events)-1].Recv
	}
	r.Duration = time.Duration(last - first)
	r.start = first
	for _, i := range faultStarts {
		e := events[i]
		if len(r.Windows) > 0 {
			r.Windows[len(r.Windows)-1].end = e.T
		}
		if e.Fault == "drain" {
			break
		}
		w := window{kind: e.Fault, target: e.Target, start: e.T, heal: e.T, end: last, unsafe: faultKinds[e.Fault].unsafe}
		for _, h := range events[i:] {
			if h.Ev == evHealed && h.Fault == e.Fault {
				w.heal = h.T
				break
			}
		}
		r.Windows = append(r.Windows, w)
		if e.Fault == "redis-restart" {
			r.Restarts++
		}
	}
	rows := map[string]*Row{}
	row := func(t int64) *Row {
		kind := "none"
		for i := len(r.Windows) - 1; i >= 0; i-- {
			if w := r.Windows[i]; t >= w.start && t < w.end {
				kind = w.kind
				break
			}
		}
		if rows[kind] == nil {
			rows[kind] = &Row{Fault: kind, Unsafe: faultKinds[kind].unsafe}
		}
		return rows[kind]
	}
	row(-1) // "none" always has a row
	// A consequence of an empty restart that lasts beyond its window (the
	// fence counter started over) goes to the restart's row.
	refusedRow := func(t int64) *Row {
		for i := len(r.Windows) - 1; i >= 0; i-- {
			if w := r.Windows[i]; w.unsafe && w.start <= t {
				return row(w.start)
			}
		}
		return row(t)
	}
	for _, w := range r.Windows {
		row(w.start).N++
	}

	// Holds.
	holds := map[string]*hold{}
	byObj := map[string][]*hold{}
	for _, e := range events {
		switch e.Ev {
		case evAcq:
			h := &hold{id: e.Hold, w: e.W, obj: e.Obj, tcall: e.TCall, tacq: e.T, token: e.Token}
			holds[e.Hold] = h
			byObj[e.Obj] = append(byObj[e.Obj], h)
			switch e.Obj {
			case objMutex:
				row(e.T).Holds[0]++
			case objFenced:
				row(e.T).Holds[1]++
			case objPermits:
				row(e.T).Holds[2]++
			}
		case evWrite:
			if h := holds[e.Hold]; h != nil {
				h.writes = append(h.writes, e)
				h.lastAlive = max(h.lastAlive, e.T)
			}
		case evUnlock:
			if h := holds[e.Hold]; h != nil && e.Err == "" {
				h.unlocked = e.T
			}
		case evRel:
			if h := holds[e.Hold]; h != nil && e.Alive {
				h.lastAlive = max(h.lastAlive, e.T)
			}
		}
	}
	for _, obj := range []string{objMutex, objFenced} {
		hs := byObj[obj]
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].tacq < hs[j].tacq })
		k := 0
		if obj == objFenced {
			k = 1
		}
		for i, a := range hs {
			if i+1 < len(hs) && hs[i+1].tacq < a.lastAlive {
				row(hs[i+1].tacq).Overlaps[k]++
			}
			// A lock that Unlock (returning nil) left free goes to a waiter
			// within milliseconds. When the next holder waited for most of
			// a lease after the Unlock, either the lock stayed held (e.g.
			// a retried acquire counted twice) or the waiter missed the
			// release and woke on its fallback timer.
			// A fault that lasts (an outage, a pause) explains a stall
			// during it; an instant one (a kill, a cut) does not.
			if i+1 < len(hs) && a.unlocked > 0 {
				next := hs[i+1]
				if next.tacq-max(next.tcall, a.unlocked) > int64(lease)*9/10 && !r.lasting(a.unlocked, next.tacq) {
					row(a.unlocked).HeldAfter[k]++
				}
			}
			if i+1 < len(hs) {
				next := hs[i+1]
				for _, w := range a.writes {
					if w.T > next.tacq {
						row(w.T).LateAfterEnd[k]++
					}
				}
			}
			for _, w := range a.writes {
				switch w.Res {
				case resLate:
					row(w.Recv).Late++
				case resRejected:
					// Stale when a later hold had been acquired before the
					// write reached the storage; otherwise the newest
					// holder was refused.
					if i+1 < len(hs) && hs[i+1].tacq < w.Recv {
						row(w.Recv).Rejected++
					} else {
						refusedRow(w.Recv).Refused++
					}
				}
			}
		}
		if obj == objFenced {
			// hs is sorted by acquire stamp; the holds certainly before b
			// (acquired before b called Lock) are a prefix of it.
			byCall := slices.Clone(hs)
			sort.SliceStable(byCall, func(i, j int) bool { return byCall[i].tcall < byCall[j].tcall })
			var prefixMax int64
			j := 0
			for _, b := range byCall {
				for ; j < len(hs) && hs[j].tacq < b.tcall; j++ {
					prefixMax = max(prefixMax, hs[j].token)
				}
				if b.token <= prefixMax {
					refusedRow(b.tacq).FenceOrder++
				}
			}
		}
	}
	// The semaphore: a sweep over [acquired, last alive] intervals.
	type edge struct {
		t     int64
		delta int
	}
	var edges []edge
	for _, h := range byObj[objPermits] {
		if h.lastAlive > h.tacq {
			edges = append(edges, edge{h.tacq, +1}, edge{h.lastAlive, -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t != edges[j].t {
			return edges[i].t < edges[j].t
		}
		return edges[i].delta < edges[j].delta // ends before starts at one instant
	})
	held := 0
	for _, e := range edges {
		held += e.delta
		if e.delta > 0 && held > permits {
			row(e.t).OverAdmitted++
		}
	}

	// The queue.
	offered := map[string]int64{}
	failed := map[string]bool{}
	acks := map[string]int{}
	expiredAcks := map[string]int{}            // msg -> Acks that failed and should have been redelivered (ackFailed)
	ackedItems := map[string]map[string]bool{} // msg -> items acknowledged
	takes := map[string]int{}
	for _, e := range events {
		switch e.Ev {
		case evOffer:
			if e.Err == "" {
				offered[e.Msg] = e.T
			} else {
				failed[e.Msg] = true
				r.OfferFailed++
			}
		case evAcqErr:
			if e.Obj == objFenced && strings.Contains(e.Err, "fence counter went back") {
				r.FenceResets++
			}
		case evTake:
			takes[e.Msg]++
			if takes[e.Msg] > 1 {
				row(e.T).Redelivered++
				r.Redelivered++
			}
		case evAck:
			if ackFailed(e, last) {
				expiredAcks[e.Msg]++
			}
			if e.Err == "" {
				acks[e.Msg]++
				r.Acked++
				if ackedItems[e.Msg] == nil {
					ackedItems[e.Msg] = map[string]bool{}
				}
				if acks[e.Msg] == 2 {
					r.DupAcks++
					if !ackedItems[e.Msg][e.Item] {
						r.DupCopies++
					}
				}
				ackedItems[e.Msg][e.Item] = true
				if _, ok := offered[e.Msg]; !ok && failed[e.Msg] {
					r.AckedUnoffered++
				}
			}
		}
	}
	r.Offered = len(offered)
	// An offer that returned before Redis came back landed on the server
	// that was killed (the fault event is recorded just before the kill,
	// so an offer may return after it and still be gone).
	lastRestart := int64(-1)
	for _, w := range r.Windows {
		if w.kind == "redis-restart" {
			lastRestart = w.heal
		}
	}
	for msg, t := range offered {
		if acks[msg] > 0 {
			continue
		}
		if t < lastRestart {
			r.LostInRestart++
		} else {
			r.Lost = append(r.Lost, msg)
			if expiredAcks[msg] > 0 && expiredAcks[msg] == takes[msg] {
				r.AckExpiredGone = append(r.AckExpiredGone, msg)
			}
		}
	}
	slices.Sort(r.Lost)
	slices.Sort(r.AckExpiredGone)

	r.checkTicks(events)
	r.recovery(events)
	for i := range r.Windows {
		w := &r.Windows[i]
		rw := rows[w.kind]
		if !rw.recoveredSeen {
			rw.recoveredSeen = true
			rw.WorstLock, rw.WorstAll, rw.WorstQueue = w.recoverLock, w.recoverAll, w.recoverQueue
		} else {
			rw.WorstLock = worse(rw.WorstLock, w.recoverLock)
			rw.WorstAll = worse(rw.WorstAll, w.recoverAll)
			rw.WorstQueue = worse(rw.WorstQueue, w.recoverQueue)
		}
		if w.recoverAll >= 0 && w.recoverAll <= lease+time.Second {
			rw.Recovered++
		}
	}
	for _, k := range append([]string{"none"}, faultNames()...) {
		if rows[k] != nil {
			r.Rows = append(r.Rows, rows[k])
		}
	}
	for w := range workers {
		if strings.HasSuffix(w, ".0") {
			r.Workers++
		}
	}
	r.defects(events)
	r.linearizable(events)
	return r
}

// ackFailed reports whether e is an Ack that failed and whose item, had
// the Ack not landed, must come back: it answered "no longer in flight"
// (the item was not in flight), or another error (a network error after
// go-redis's retries) two visibility timeouts before the end of the log
// at last.
func ackFailed(e Event, last int64) bool {
	return e.Ev == evAck && e.Err != "" &&
		(strings.Contains(e.Err, "no longer in flight") || e.T+2*int64(lease) < last)
}

// lasting reports whether a fault that lasts (longer than 100ms) was
// under way at some time between t1 and t2.
func (r *Report) lasting(t1, t2 int64) bool {
	for _, w := range r.Windows {
		if w.heal-w.start > int64(100*time.Millisecond) && !faultKinds[w.kind].continuous && w.start < t2 && w.heal > t1 {
			return true
		}
	}
	return false
}

// permits is the semaphore's capacity in tortureobj/lockgen.yaml.
const permits = 3

// worse returns the larger recovery time, where -1 (never) is the worst.
func worse(a, b time.Duration) time.Duration {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

// recovery measures, for each window, the time from the fault's healing
// until the mutex was taken again (by anyone), until every worker live
// through the window took the mutex, the fenced lock and a permit again,
// and until a message was acknowledged again.
func (r *Report) recovery(events []Event) {
	spawned := map[string]int64{}
	exited := map[string]int64{}
	for _, e := range events {
		switch e.Ev {
		case evSpawn:
			spawned[e.W] = e.T
		case evExit:
			exited[e.W] = e.T
		}
	}
	for i := range r.Windows {
		w := &r.Windows[i]
		w.recoverLock, w.recoverAll, w.recoverQueue = -1, -1, -1
		firstAcq := map[string]map[string]int64{} // obj -> worker -> first acquire after heal
		during := map[string]bool{}               // worker/obj acquired while the fault lasted
		for _, e := range events {
			if e.Ev == evAcq && e.T >= w.start && e.T <= w.heal {
				during[e.W+"/"+e.Obj] = true
			}
			if e.T <= w.heal || e.T >= w.end {
				continue
			}
			switch e.Ev {
			case evAcq:
				if firstAcq[e.Obj] == nil {
					firstAcq[e.Obj] = map[string]int64{}
				}
				if _, ok := firstAcq[e.Obj][e.W]; !ok {
					firstAcq[e.Obj][e.W] = e.T
				}
				if e.Obj == objMutex && w.recoverLock < 0 {
					w.recoverLock = time.Duration(e.T - w.heal)
				}
			case evAck:
				if e.Err == "" && w.recoverQueue < 0 {
					w.recoverQueue = time.Duration(e.T - w.heal)
				}
			}
		}
		var worst time.Duration
		all := true
		for worker, t := range spawned {
			if t > w.heal {
				continue // started after the fault healed: not a waiter of it
			}
			if x, ok := exited[worker]; ok && x < w.end {
				continue // not live through the window
			}
			for _, obj := range []string{objMutex, objFenced, objPermits} {
				at, ok := firstAcq[obj][worker]
				if !ok {
					all = false
					w.missing = append(w.missing, worker+"/"+obj)
					continue
				}
				worst = max(worst, time.Duration(at-w.heal))
			}
		}
		slices.Sort(w.missing)
		// A pair that was missing in the window before and took nothing
		// while this fault lasted has been stuck since then: it says
		// nothing about this fault.
		if i > 0 {
			var fresh []string
			for _, m := range w.missing {
				if slices.Contains(r.Windows[i-1].missing, m) && !during[m] {
					w.carried = append(w.carried, m)
				} else {
					fresh = append(fresh, m)
				}
			}
			if len(fresh) == 0 && len(w.carried) > 0 {
				all = true // recovered but for those already stuck
			}
			w.missing = fresh
		}
		if all {
			w.recoverAll = worst
		}
	}
}

// Violations is what the short mode asserts: the counts that must be zero
// outside the faults marked unsafe.
func (r *Report) Violations() (overlaps, writesAfterEnd, overAdmitted, lost int) {
	for _, rw := range r.Rows {
		if rw.Unsafe {
			continue
		}
		overlaps += rw.Overlaps[0] + rw.Overlaps[1]
		writesAfterEnd += rw.LateAfterEnd[0] + rw.LateAfterEnd[1]
		overAdmitted += rw.OverAdmitted
	}
	return overlaps, writesAfterEnd, overAdmitted, len(r.Lost)
}

func dur(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// Print writes the report as a Markdown table and its notes.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "%d workers, %d faults, %.0fs; lease %v, %d permits; recovery goal lease+1s = %v\n\n",
		r.Workers, len(r.Windows), r.Duration.Seconds(), lease, permits, lease+time.Second)
	fmt.Fprintln(w, "| fault | n | holds m/f/p | overlaps m/f | writes after lease end m/f | late writes: accepted (m) / rejected (f) | fresh holder refused (f) | fence order | over-admitted | stalled after Unlock m/f | redelivered | recovered ≤ lease+1s | worst: lock again / all waiters / queue |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, rw := range r.Rows {
		name := rw.Fault
		if rw.Unsafe {
			name += " (*)"
		}
		rec, worst := "-", "-"
		if rw.Fault != "none" {
			rec = fmt.Sprintf("%d/%d", rw.Recovered, rw.N)
			worst = fmt.Sprintf("%s / %s / %s", dur(rw.WorstLock), dur(rw.WorstAll), dur(rw.WorstQueue))
		}
		fmt.Fprintf(w, "| %s | %d | %d/%d/%d | %d/%d | %d/%d | %d / %d | %d | %d | %d | %d/%d | %d | %s | %s |\n",
			name, rw.N, rw.Holds[0], rw.Holds[1], rw.Holds[2], rw.Overlaps[0], rw.Overlaps[1],
			rw.LateAfterEnd[0], rw.LateAfterEnd[1], rw.Late, rw.Rejected, rw.Refused, rw.FenceOrder,
			rw.OverAdmitted, rw.HeldAfter[0], rw.HeldAfter[1], rw.Redelivered, rec, worst)
	}
	fmt.Fprintf(w, "\nqueue: %d offered, %d acknowledged, %d lost, %d lost in empty Redis restarts (*), %d acknowledged twice (%d of them two items: the offer landed twice), %d redelivered, %d offers failed (%d of them landed)\n",
		r.Offered, r.Acked, len(r.Lost), r.LostInRestart, r.DupAcks, r.DupCopies, r.Redelivered, r.OfferFailed, r.AckedUnoffered)
	if len(r.Lost) > 0 {
		shown := r.Lost
		if len(shown) > 10 {
			shown = shown[:10]
		}
		fmt.Fprintf(w, "lost: %s\n", strings.Join(shown, " "))
	}
	if len(r.AckExpiredGone) > 0 {
		fmt.Fprintf(w, "of the lost, %d were taken and every Ack failed (\"delivery no longer in flight\", or a network error two visibility timeouts before the end), yet they never came back (an Ack whose reply was lost, and that go-redis retried, would look so): %s\n",
			len(r.AckExpiredGone), strings.Join(r.AckExpiredGone, " "))
	}
	fmt.Fprintf(w, "schedule: %d ticks fired, %d fired twice, %d missed, %d more lost in empty Redis restarts (*)\n",
		r.Ticks, r.TickDups, r.TickMissed, r.TickMissedInRestart)
	if r.FenceResets > 0 {
		fmt.Fprintf(w, "fenced lock: %d Lock calls answered ErrFenceReset (the fence counter went back after an empty restart)\n", r.FenceResets)
	}
	r.printDefects(w)
	r.printLinear(w)
	fmt.Fprintln(w, "\n(*) Redis runs without persistence: an empty restart forgets every lock, permit, fence counter and queued message, so overlaps, fence-order breaks and lost messages in its window are expected, not runtime bugs.")
	var slow []string
	for _, win := range r.Windows {
		if len(win.missing) > 0 || win.recoverAll > lease+time.Second {
			s := fmt.Sprintf("%s at %.1fs: %s", win.kind, time.Duration(win.heal-r.start).Seconds(), dur(win.recoverAll))
			if len(win.missing) > 0 {
				s += " (never again: " + strings.Join(win.missing, " ") + ")"
			}
			slow = append(slow, s)
		}
		if len(win.carried) > 0 {
			slow = append(slow, fmt.Sprintf("%s at %.1fs: still stuck since an earlier fault (not counted here): %s",
				win.kind, time.Duration(win.heal-r.start).Seconds(), strings.Join(win.carried, " ")))
		}
	}
	if len(slow) > 0 {
		fmt.Fprintf(w, "\nnot recovered within lease+1s:\n- %s\n", strings.Join(slow, "\n- "))
	}
}

// checkTicks counts the schedule's ticks (see Report.Ticks).
func (r *Report) checkTicks(events []Event) {
	seen := map[int64]bool{}
	var ticks []int64
	for _, e := range events {
		if e.Ev != evTick {
			continue
		}
		ms, err := strconv.ParseInt(e.Msg, 10, 64)
		if err != nil {
			r.BadTicks++
			continue
		}
		if seen[ms] {
			r.TickDups++
			continue
		}
		seen[ms] = true
		ticks = append(ticks, ms)
	}
	r.Ticks = len(ticks)
	if len(ticks) == 0 {
		return
	}
	slices.Sort(ticks)
	// mono's time of a tick: the events carry it in T.
	monoOf := map[int64]int64{}
	for _, e := range events {
		if e.Ev == evTick {
			if ms, err := strconv.ParseInt(e.Msg, 10, 64); err == nil {
				monoOf[ms] = e.T
			}
		}
	}
	inRestart := func(ms int64) bool {
		// Between two ticks found, a missing one's mono time is about the
		// first's plus the difference.
		t := monoOf[ticks[0]] + (ms-ticks[0])*1e6
		for _, w := range r.Windows {
			if w.kind == "redis-restart" && t >= w.start-int64(time.Second) && t <= w.heal+3*int64(time.Second) {
				return true
			}
		}
		return false
	}
	for i := 1; i < len(ticks); i++ {
		for ms := ticks[i-1] + 1000; ms < ticks[i]; ms += 1000 {
			if inRestart(ms) {
				r.TickMissedInRestart++
			} else {
				r.TickMissed++
			}
		}
	}
}
