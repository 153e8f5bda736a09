package inspect

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime"
)

// This file is the queues' home in inspect (see kind): reported as
// KindQueue, read as QueueState. Their actions are in actions.go and
// items.go.

func init() { register("queues", queueKind{}) }

type queueKind struct{}

func (queueKind) names() []string { return []string{KindQueue} }

func (queueKind) name(spec.Obj) string { return KindQueue }

func (queueKind) read(ctx context.Context, in *Inspector, pipe redis.Pipeliner, f *found, inst *Instance) reader {
	st := &QueueState{}
	inst.Queue = st
	sq := f.obj.obj.(*spec.Queue)
	var retention time.Duration
	if sq.Retention != nil {
		retention = sq.Retention.For
	}
	return in.readQueue(ctx, pipe, f.key, sq.Reliable != nil, retention, st)
}

func (queueKind) total(t *Totals, inst *Instance) {
	q := inst.Queue
	if q == nil {
		return
	}
	t.Ready += q.Ready
	t.Delayed += q.Delayed
	t.InFlight += q.InFlight
	t.Dead += q.Dead
	if q.Paused {
		t.Paused++
	}
}

func (queueKind) summary(o *ObjectState) string {
	s := fmt.Sprintf("%d ready, %d delayed, %d in flight, %d dead", o.Ready, o.Delayed, o.InFlight, o.Dead)
	if o.Paused > 0 {
		s += fmt.Sprintf(", %d paused", o.Paused)
	}
	return s
}

func (k queueKind) brief(o *ObjectState) string { return k.summary(o) }

// depths says a queue instance's depths, with ms formatting milliseconds.
func depths(q *QueueState, ms func(int64) string) string {
	s := fmt.Sprintf("%d ready, %d delayed, %d in flight, %d dead", q.Ready, q.Delayed, q.InFlight, q.Dead)
	if q.Paused {
		s = "PAUSED (consumers take nothing), " + s
	}
	if q.NextDueMs != nil {
		s += ", next due in " + ms(*q.NextDueMs)
	}
	return s
}

func (queueKind) state(inst *Instance) string {
	if inst.Queue == nil {
		return ""
	}
	return depths(inst.Queue, ms)
}

func (queueKind) details(tw io.Writer, inst *Instance) {
	q := inst.Queue
	if q == nil {
		return
	}
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
	if len(q.Completed) > 0 {
		fmt.Fprintln(tw, "\nDONE\tAGO\tATTEMPT\tBODY")
		for _, it := range q.Completed {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", it.ID, ms(*it.DoneAgoMs), it.Deliveries, it.Body)
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

func (queueKind) gauges(o *ObjectState) []Gauge {
	var gs []Gauge
	for _, s := range []struct {
		state string
		n     int64
	}{{"ready", o.Ready}, {"delayed", o.Delayed}, {"in_flight", o.InFlight}, {"dead", o.Dead}} {
		gs = append(gs, Gauge{Name: "lockgen_queue_items", Help: "Items of a queue by state, summed over its instances.", Value: float64(s.n), Labels: []string{"state", s.state}})
	}
	gs = append(gs, Gauge{Name: "lockgen_queue_paused", Help: "Instances of a queue whose consumers are paused.", Value: float64(o.Paused)})
	return append(gs, Gauge{Name: "lockgen_queue_dead_letters", Help: "Items on a queue's dead-letter lists.", Value: float64(o.Dead)})
}

func (queueKind) view(inst *Instance) View {
	q := inst.Queue
	if q == nil {
		return View{}
	}
	v := View{State: depths(q, msText)}
	offer := func(id, action, label, question string) Offer {
		return Offer{Action: action, Label: label, Question: fmt.Sprintf("%s item %s of %s?", question, id, inst.Key)}
	}
	item := func(state, id, text string, actions ...[3]string) {
		it := ViewItem{ID: id, State: state, Text: text}
		if id != "" {
			for _, a := range actions {
				it.Actions = append(it.Actions, offer(id, a[0], a[1], a[2]))
			}
		}
		v.Items = append(v.Items, it)
	}
	remove := [3]string{"remove-item", "Remove", "Remove"}
	bury := [3]string{"bury-item", "Dead-letter", "Move to the dead letters"}
	unique := func(key string) string {
		if key == "" {
			return ""
		}
		return fmt.Sprintf(" [unique %q]", key)
	}
	deliveries := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf(", %d deliveries", n)
	}
	for _, it := range q.ReadyItems {
		item(ItemReady, it.ID, fmt.Sprintf("ready%s%s: %s", deliveries(it.Deliveries), unique(it.Unique), it.Body), bury, remove)
	}
	for _, it := range q.DelayedItems {
		due := "undefined"
		if it.DueMs != nil {
			due = msText(*it.DueMs)
		}
		item(ItemDelayed, it.ID, fmt.Sprintf("delayed, due in %s%s%s: %s", due, deliveries(it.Deliveries), unique(it.Unique), it.Body),
			[3]string{"run-item-now", "Run now", "Make ready now"}, bury, remove)
	}
	for _, d := range q.Deliveries {
		item(ItemInFlight, d.ID, fmt.Sprintf("in flight: attempt %d, redelivered in %s%s: %s", d.Deliveries, msText(d.DeadlineMs), unique(d.Unique), d.Body))
	}
	for _, d := range q.DeadLetters {
		item(ItemDead, d.ID, fmt.Sprintf("dead after %d deliveries%s: %s — %s", d.Deliveries, unique(d.Unique), d.Reason, d.Body),
			[3]string{"redrive-item", "Redrive", "Redrive"}, remove)
	}
	if shown, total := int64(len(v.Items)), q.Ready+q.Delayed+q.InFlight+q.Dead; total > shown {
		v.Note = fmt.Sprintf("first items only: %d of %d shown", shown, total)
	}
	for _, it := range q.Completed {
		item(ItemDone, it.ID, fmt.Sprintf("done %s ago, attempt %d%s: %s", msText(*it.DoneAgoMs), it.Deliveries, unique(it.Unique), it.Body))
	}
	if q.Dead > 0 {
		v.Actions = append(v.Actions, Offer{Action: "redrive", Label: "Redrive", Question: fmt.Sprintf("Put the %d dead letters of %s back on the queue?", q.Dead, inst.Key)})
	}
	if q.Paused {
		v.Actions = append(v.Actions, Offer{Action: "resume", Label: "Resume", Question: "Resume the consumers of " + inst.Key + "?"})
	} else {
		v.Actions = append(v.Actions, Offer{Action: "pause", Label: "Pause", Question: "Pause the consumers of " + inst.Key + " (producers keep offering)?"})
	}
	v.Actions = append(v.Actions, Offer{Action: "purge", Label: "Purge", Question: "Delete every item of " + inst.Key + "?"})
	return v
}

// readQueue adds the reads of a queue instance to pipe: its depths and
// the first items of each kind (ids from the lists and sets, then their
// bodies, delivery counts and reasons in a second round).
func (in *Inspector) readQueue(ctx context.Context, pipe redis.Pipeliner, key string, reliable bool, retention time.Duration, st *QueueState) func(int64) func(redis.Pipeliner) func() {
	sub := func(s string) string { return keys.Sub(key, s) }
	max := int64(in.opts.MaxItems)
	ready := pipe.LLen(ctx, key)
	readyItems := pipe.LRange(ctx, key, 0, max-1)
	delayed := pipe.ZCard(ctx, sub("delayed"))
	delayedItems := pipe.ZRangeWithScores(ctx, sub("delayed"), 0, max-1)
	inflight := pipe.ZCard(ctx, sub("inflight"))
	deliveries := pipe.ZRangeWithScores(ctx, sub("inflight"), 0, max-1)
	dead := pipe.LLen(ctx, sub("dead"))
	deadIDs := pipe.LRange(ctx, sub("dead"), 0, max-1)
	paused := pipe.Get(ctx, sub("paused"))
	var done *redis.StringSliceCmd
	if retention > 0 {
		done = pipe.LRange(ctx, sub("done"), 0, max-1)
	}
	return func(nowMs int64) func(redis.Pipeliner) func() {
		if done != nil {
			st.Completed = completed(done.Val(), nowMs, retention)
		}
		st.Ready, st.Delayed, st.InFlight, st.Dead = ready.Val(), delayed.Val(), inflight.Val(), dead.Val()
		if since, err := paused.Int64(); err == nil && since > 0 {
			d := nowMs - since
			if d < 0 {
				d = 0 // clocks: nowMs is the server's, as since
			}
			st.Paused, st.PausedForMs = true, &d
		}
		// ids lists every item whose body and counters are read next:
		// ready (a reliable queue's ids), delayed, in flight, dead.
		var ids []string
		if reliable {
			ids = append(ids, readyItems.Val()...)
		} else {
			for _, body := range readyItems.Val() {
				st.ReadyItems = append(st.ReadyItems, queueItem("", ItemReady, body, 0))
			}
		}
		nReady := len(ids)
		for i, z := range delayedItems.Val() {
			due := int64(max0(int(int64(z.Score) - nowMs)))
			if i == 0 {
				next := due
				st.NextDueMs = &next
			}
			ids = append(ids, z.Member.(string))
			st.DelayedItems = append(st.DelayedItems, QueueItem{ID: z.Member.(string), State: ItemDelayed, DueMs: &due})
		}
		for _, z := range deliveries.Val() {
			id := z.Member.(string)
			ids = append(ids, id)
			st.Deliveries = append(st.Deliveries, Delivery{ID: id, DeadlineMs: int64(z.Score) - nowMs})
		}
		dids := deadIDs.Val()
		ids = append(ids, dids...)
		if len(ids) == 0 {
			return nil
		}
		return func(p redis.Pipeliner) func() {
			body := p.HMGet(ctx, sub("data"), ids...)
			att := p.HMGet(ctx, sub("att"), ids...)
			var reason *redis.SliceCmd
			if len(dids) > 0 {
				reason = p.HMGet(ctx, sub("err"), dids...)
			}
			return func() {
				bodies, atts := body.Val(), att.Val()
				if len(bodies) != len(ids) || len(atts) != len(ids) {
					return // the round failed: the depths stand alone
				}
				i := 0
				for ; i < nReady; i++ {
					st.ReadyItems = append(st.ReadyItems, queueItem(ids[i], ItemReady, strAny(bodies[i]), atoiAny(atts[i])))
				}
				for j := range st.DelayedItems {
					it := &st.DelayedItems[j]
					it.Deliveries = atoiAny(atts[i])
					it.Body, it.Codec, it.Carried = splitBody(strAny(bodies[i]))
					it.Unique = it.Carried[runtime.UniqueKeyField]
					i++
				}
				for j := range st.Deliveries {
					var carried map[string]string
					st.Deliveries[j].Deliveries = atoiAny(atts[i])
					st.Deliveries[j].Body, _, carried = splitBody(strAny(bodies[i]))
					st.Deliveries[j].Unique = carried[runtime.UniqueKeyField]
					i++
				}
				var reasons []any
				if reason != nil {
					reasons = reason.Val()
				}
				for j, id := range dids {
					r := ""
					if j < len(reasons) {
						r = strAny(reasons[j])
					}
					st.DeadLetters = append(st.DeadLetters, deadLetter(id, strAny(bodies[i]), r, atoiAny(atts[i])))
					i++
				}
			}
		}
	}
}

// completed reads the done list's entries ("<id>\n<done ms>\n<delivery>\n<body>",
// newest first: templates/queue_ack.lua) acknowledged within retention.
func completed(entries []string, nowMs int64, retention time.Duration) []QueueItem {
	var out []QueueItem
	for _, e := range entries {
		f := strings.SplitN(e, "\n", 4)
		if len(f) != 4 {
			continue
		}
		ms, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		ago := nowMs - ms
		if ago > retention.Milliseconds() {
			break // the rest are older still
		}
		ago = max(ago, 0)
		it := queueItem(f[0], ItemDone, f[3], atoiAny(f[2]))
		it.DoneAgoMs = &ago
		out = append(out, it)
	}
	return out
}

// waitsFor: none; a queue has no holders.
func (queueKind) waitsFor(*Instance) ([]Holder, []Waiter) { return nil, nil }
