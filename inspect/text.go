package inspect

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// WriteSummary writes a table of every object of snap, and the cycles of g.
func WriteSummary(w io.Writer, snap *Snapshot, g *Graph) {
	tw := table(w)
	fmt.Fprintln(tw, "OBJECT\tKIND\tKEY\tINSTANCES\tSTATE")
	for _, o := range snap.Objects {
		n := fmt.Sprint(o.Count)
		if o.Truncated {
			n += "+"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Name, o.Kind, o.Pattern, n, summarize(o))
	}
	tw.Flush()
	if snap.Truncated {
		fmt.Fprintf(w, "\nThe scan stopped at its budget (-max-scan): counts are lower bounds.\n")
	}
	if g != nil {
		WriteCycles(w, g)
	}
}

// WriteCycles writes the deadlocks of g, if any.
func WriteCycles(w io.Writer, g *Graph) {
	for i, cyc := range g.Cycles {
		fmt.Fprintf(w, "\nDEADLOCK %d: these owners wait for one another:\n", i+1)
		for _, e := range cyc {
			fmt.Fprintf(w, "  %s (client %s) waits for %s, held by %s (client %s)\n", e.Waiter, e.WaiterClient, e.Key, e.Holder, e.HolderClient)
		}
	}
}

// summarize says in a few words what an object's instances hold.
func summarize(o *ObjectState) string {
	var parts []string
	switch o.Kind {
	case KindSemaphore:
		parts = append(parts, fmt.Sprintf("%d/%d permits in use", o.Held, o.Capacity))
	case KindQueue:
		parts = append(parts, fmt.Sprintf("%d ready, %d delayed, %d in flight, %d dead", o.Ready, o.Delayed, o.InFlight, o.Dead))
	case KindLatch:
		open := 0
		for _, i := range o.Instances {
			if i.Latch.Open {
				open++
			}
		}
		parts = append(parts, fmt.Sprintf("%d open", open))
	case KindLimiter:
		low, capacity := -1, 0
		for _, i := range o.Instances {
			for _, r := range i.Limiter.Clients {
				if low < 0 || r.Remaining < low {
					low, capacity = r.Remaining, i.Limiter.Capacity
				}
			}
		}
		if low >= 0 {
			parts = append(parts, fmt.Sprintf("lowest allowance %d/%d", low, capacity))
		}
	default:
		parts = append(parts, fmt.Sprintf("%d held", o.Held))
	}
	if o.Waiters > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting", o.Waiters))
	}
	return strings.Join(parts, ", ")
}

func params(inst *Instance) string {
	var s []string
	for _, p := range inst.Params {
		s = append(s, p.Name+"="+p.Value)
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " ")
}

// WriteListing writes a table of an object's instances.
func WriteListing(w io.Writer, l *Listing) {
	tw := table(w)
	fmt.Fprintln(tw, "PARAMS\tKEY\tSTATE")
	for _, inst := range l.Instances {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", params(inst), inst.Key, State(inst))
	}
	tw.Flush()
	if l.Truncated {
		fmt.Fprintln(w, "\nThe listing stopped at its budget (-max-scan, or 1000 instances).")
	}
}

func ms(v int64) string {
	if v < 0 {
		return "no expiry"
	}
	return (time.Duration(v) * time.Millisecond).String()
}

// State says in one line what one instance holds.
func State(inst *Instance) string {
	switch {
	case inst.Lock != nil:
		l := inst.Lock
		if !l.Held {
			s := "free"
			if l.LastToken > 0 {
				s += fmt.Sprintf(" (last token %d)", l.LastToken)
			}
			return s
		}
		var hs []string
		for _, h := range l.Holders {
			s := h.Owner
			if h.Side != "" {
				s = h.Side + " " + s
			}
			if h.Holds > 1 {
				s += fmt.Sprintf(" x%d", h.Holds)
			}
			if h.Token > 0 {
				s += fmt.Sprintf(" token %d", h.Token)
			}
			hs = append(hs, s+", "+ms(h.TTLMs)+" left")
		}
		s := "held by " + strings.Join(hs, "; ")
		if len(l.Waiters) > 0 {
			s += fmt.Sprintf("; %d waiting", len(l.Waiters))
		}
		return s
	case inst.Semaphore != nil:
		s := inst.Semaphore
		return fmt.Sprintf("%d/%d permits in use, %d free, %d holders", s.Held, s.Capacity, s.Free, len(s.Holders))
	case inst.Latch != nil:
		l := inst.Latch
		switch {
		case l.Open:
			return "open"
		case !l.Set:
			return fmt.Sprintf("not set (count %d)", l.Count)
		}
		return fmt.Sprintf("count %d, expires in %s", l.Count, ms(l.TTLMs))
	case inst.Limiter != nil:
		var s []string
		for _, r := range inst.Limiter.Clients {
			x := fmt.Sprintf("%d/%d left, full in %s", r.Remaining, inst.Limiter.Capacity, ms(r.ResetAfterMs))
			if r.Client != "" {
				x = r.Client + ": " + x
			}
			if r.Error != "" {
				x += " (" + r.Error + ")"
			}
			s = append(s, x)
		}
		return strings.Join(s, "; ")
	case inst.Queue != nil:
		q := inst.Queue
		s := fmt.Sprintf("%d ready, %d delayed, %d in flight, %d dead", q.Ready, q.Delayed, q.InFlight, q.Dead)
		if q.NextDueMs != nil {
			s += ", next due in " + ms(*q.NextDueMs)
		}
		return s
	}
	return ""
}

// WriteInstance writes one instance: its state, holders, waiters and
// queue items.
func WriteInstance(w io.Writer, inst *Instance) {
	fmt.Fprintf(w, "%s %s (%s)\n%s\n", inst.Object, params(inst), inst.Kind, inst.Key)
	fmt.Fprintf(w, "state: %s\n", State(inst))
	tw := table(w)
	defer tw.Flush()
	switch {
	case inst.Lock != nil && len(inst.Lock.Holders) > 0, inst.Semaphore != nil && len(inst.Semaphore.Holders) > 0:
		fmt.Fprintln(tw, "\nHOLDER\tCLIENT\tSIDE\tHOLDS\tPERMITS\tTOKEN\tLEASE LEFT")
		var hs []Holder
		if inst.Lock != nil {
			hs = inst.Lock.Holders
		} else {
			hs = inst.Semaphore.Holders
		}
		for _, h := range hs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", h.Owner, h.Client, dash(h.Side), h.Holds, h.Permits, h.Token, ms(h.TTLMs))
		}
	}
	var waiters []Waiter
	if inst.Lock != nil {
		waiters = inst.Lock.Waiters
	} else if inst.Semaphore != nil {
		waiters = inst.Semaphore.Waiters
	}
	if len(waiters) > 0 {
		fmt.Fprintln(tw, "\nWAITER\tCLIENT\tSIDE\tPERMITS\tPLACE KEPT FOR")
		for _, wt := range waiters {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", wt.Owner, wt.Client, dash(wt.Side), wt.Permits, ms(wt.TTLMs))
		}
	}
	if q := inst.Queue; q != nil {
		if len(q.ReadyItems) > 0 {
			fmt.Fprintln(tw, "\nREADY\tDELIVERIES\tBODY")
			for _, it := range q.ReadyItems {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", dash(it.ID), it.Deliveries, it.Body)
			}
		}
		if len(q.DelayedItems) > 0 {
			fmt.Fprintln(tw, "\nDELAYED\tDUE IN\tDELIVERIES\tBODY")
			for _, it := range q.DelayedItems {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", it.ID, ms(*it.DueMs), it.Deliveries, it.Body)
			}
		}
		if len(q.Deliveries) > 0 {
			fmt.Fprintln(tw, "\nIN FLIGHT\tATTEMPT\tREDELIVERED IN\tBODY")
			for _, d := range q.Deliveries {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", d.ID, d.Deliveries, ms(d.DeadlineMs), d.Body)
			}
		}
		if len(q.DeadLetters) > 0 {
			carried := false
			for _, d := range q.DeadLetters {
				carried = carried || len(d.Carried) > 0
			}
			if carried {
				fmt.Fprintln(tw, "\nDEAD LETTER\tDELIVERIES\tREASON\tBODY\tCARRIED")
			} else {
				fmt.Fprintln(tw, "\nDEAD LETTER\tDELIVERIES\tREASON\tBODY")
			}
			for _, d := range q.DeadLetters {
				if !carried {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", d.ID, d.Deliveries, d.Reason, d.Body)
					continue
				}
				ks := make([]string, 0, len(d.Carried))
				for k := range d.Carried {
					ks = append(ks, k)
				}
				slices.Sort(ks)
				for i, k := range ks {
					ks[i] = k + "=" + d.Carried[k]
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", d.ID, d.Deliveries, d.Reason, d.Body, strings.Join(ks, " "))
			}
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteItem writes one item found by Item: where it is, its counters and
// body.
func WriteItem(w io.Writer, key string, it *QueueItem) {
	if it.State == "" {
		fmt.Fprintf(w, "no item %s in %s (removed or acknowledged already, or never there)\n", it.ID, key)
		return
	}
	fmt.Fprintf(w, "item %s of %s: %s", it.ID, key, it.State)
	switch {
	case it.DueMs != nil:
		fmt.Fprintf(w, ", due in %s", ms(*it.DueMs))
	case it.DeadlineMs != nil:
		fmt.Fprintf(w, ", attempt %d, redelivered in %s", it.Deliveries, ms(*it.DeadlineMs))
	}
	if it.Deliveries > 0 && it.DeadlineMs == nil {
		fmt.Fprintf(w, ", %d deliveries", it.Deliveries)
	}
	if it.Reason != "" {
		fmt.Fprintf(w, ", reason: %s", it.Reason)
	}
	fmt.Fprintf(w, "\nbody: %s\n", it.Body)
}
