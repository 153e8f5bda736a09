package inspect

import (
	"fmt"
	"io"
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
	return withWaiters(kindOf(o.Kind).summary(o), o.Waiters)
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
func State(inst *Instance) string { return kindOf(inst.Kind).state(inst) }

// WriteInstance writes one instance: its state, holders, waiters and
// queue items.
func WriteInstance(w io.Writer, inst *Instance) {
	fmt.Fprintf(w, "%s %s (%s)\n%s\n", inst.Object, params(inst), inst.Kind, inst.Key)
	fmt.Fprintf(w, "state: %s\n", State(inst))
	tw := table(w)
	defer tw.Flush()
	kindOf(inst.Kind).details(tw, inst)
}

// writeHolders writes a table of holders, if any (locks, semaphores).
func writeHolders(tw io.Writer, hs []Holder) {
	if len(hs) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nHOLDER\tCLIENT\tSIDE\tHOLDS\tPERMITS\tTOKEN\tLEASE LEFT")
	for _, h := range hs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", h.Owner, h.Client, dash(h.Side), h.Holds, h.Permits, h.Token, ms(h.TTLMs))
	}
}

// writeWaiters writes a table of waiters, if any (locks, semaphores).
func writeWaiters(tw io.Writer, waiters []Waiter) {
	if len(waiters) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nWAITER\tCLIENT\tSIDE\tPERMITS\tPLACE KEPT FOR")
	for _, wt := range waiters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", wt.Owner, wt.Client, dash(wt.Side), wt.Permits, ms(wt.TTLMs))
	}
}

// waitersGauge is the metric of an object's registered waiters (locks,
// semaphores).
func waitersGauge(o *ObjectState) Gauge {
	return Gauge{Name: "lockgen_waiters", Help: "Registered waiters, summed over an object's instances.", Value: float64(o.Waiters)}
}

// holderText says a hold as the dashboard shows it.
func holderText(h Holder) string {
	s := h.Owner
	if h.Side != "" {
		s = h.Side + " " + s
	}
	if h.Holds > 1 {
		s += fmt.Sprintf(" ×%d", h.Holds)
	}
	if h.Permits != 0 {
		s += fmt.Sprintf(", %d permits", h.Permits)
	}
	if h.Token != 0 {
		s += fmt.Sprintf(", token %d", h.Token)
	}
	return s + ", " + msText(h.TTLMs) + " left"
}

// waiterLines are the dashboard's lines of waiters.
func waiterLines(ws []Waiter) []string {
	var out []string
	for _, w := range ws {
		s := "waiting: "
		if w.Side != "" {
			s += w.Side + " "
		}
		s += w.Owner
		if w.Permits != 0 {
			s += fmt.Sprintf(" for %d permits", w.Permits)
		}
		out = append(out, s)
	}
	return out
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
