package inspect

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/scripts/redistest"
	"github.com/lockgen/lockgen/templates"
)

// jobs returns the populated Jobs("acme") queue's items by body: ready
// "three" and "four", delayed "later", "one" in flight, "two" dead.
func (w *world) jobs(ctx context.Context) (*QueueState, map[string]string) {
	w.t.Helper()
	inst, err := w.in.Instance(ctx, "Jobs", "acme")
	if err != nil {
		w.t.Fatal(err)
	}
	q := inst.Queue
	ids := map[string]string{}
	for _, it := range q.ReadyItems {
		ids[it.Body] = it.ID
	}
	for _, it := range q.DelayedItems {
		ids[it.Body] = it.ID
	}
	for _, d := range q.Deliveries {
		ids[d.Body] = d.ID
	}
	for _, d := range q.DeadLetters {
		ids[d.Body] = d.ID
	}
	return q, ids
}

// TestQueueItems: an instance lists its ready and delayed items with ids,
// bodies and due times besides the deliveries and dead letters, and Item
// finds each by id.
func TestQueueItems(t *testing.T) {
	rdb := redistest.Single(t).Client()
	w := newWorld(t, rdb, Options{})
	ctx := context.Background()
	w.populate(ctx)
	q, ids := w.jobs(ctx)
	if len(q.ReadyItems) != 2 || q.ReadyItems[0].Body != `"three"` || q.ReadyItems[1].Body != `"four"` {
		t.Fatalf("ready items %+v, want three and four", q.ReadyItems)
	}
	for _, it := range q.ReadyItems {
		if it.ID == "" || it.State != ItemReady || it.Codec != "j" || it.DueMs != nil {
			t.Errorf("ready item %+v", it)
		}
	}
	if len(q.DelayedItems) != 1 || q.DelayedItems[0].Body != `"later"` || q.DelayedItems[0].State != ItemDelayed {
		t.Fatalf("delayed items %+v, want later", q.DelayedItems)
	}
	if due := q.DelayedItems[0].DueMs; due == nil || *due <= 0 || *due > time.Hour.Milliseconds() || *due != *q.NextDueMs {
		t.Errorf("delayed item due in %v ms, want in (0, 1h] and the next due time %d", due, *q.NextDueMs)
	}
	if len(q.Deliveries) != 1 || q.Deliveries[0].Body != `"one"` || q.Deliveries[0].Deliveries != 1 {
		t.Errorf("deliveries %+v, want one, attempt 1", q.Deliveries)
	}
	if len(ids) != 5 {
		t.Fatalf("ids by body %v, want 5 different items", ids)
	}

	for body, want := range map[string]string{`"three"`: ItemReady, `"later"`: ItemDelayed, `"one"`: ItemInFlight, `"two"`: ItemDead} {
		it, err := w.in.Item(ctx, ids[body], "Jobs", "acme")
		if err != nil {
			t.Fatal(err)
		}
		if it.State != want || it.ID != ids[body] || it.Body != body {
			t.Errorf("Item(%s) = %+v, want %s %s", ids[body], it, want, body)
		}
		switch want {
		case ItemDelayed:
			if it.DueMs == nil || *it.DueMs <= 0 {
				t.Errorf("delayed Item without due time: %+v", it)
			}
		case ItemInFlight:
			if it.DeadlineMs == nil || *it.DeadlineMs <= 0 || it.Deliveries != 1 {
				t.Errorf("Item in flight without deadline or attempt: %+v", it)
			}
		case ItemDead:
			if it.Reason != "bad input" || it.Deliveries != 1 {
				t.Errorf("dead Item: %+v, want reason bad input after 1 delivery", it)
			}
		}
	}
	if it, err := w.in.Item(ctx, "no-such-id", "Jobs", "acme"); err != nil || it.State != "" {
		t.Errorf("Item(no-such-id) = %+v, %v; want no state, no error", it, err)
	}

	var b strings.Builder
	inst, _ := w.in.Instance(ctx, "Jobs", "acme")
	WriteInstance(&b, inst)
	for _, s := range []string{"READY", ids[`"three"`], "DELAYED", ids[`"later"`], "IN FLIGHT", ids[`"one"`], "DEAD LETTER", ids[`"two"`]} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("WriteInstance does not show %s:\n%s", s, b.String())
		}
	}
}

// TestItemActions removes, redrives and runs items by id, checks Redis
// holds exactly the change, and runs each action twice: the second
// changes nothing and says the item is gone or where it is.
func TestItemActions(t *testing.T) {
	rdb := redistest.Single(t).Client()
	w := newWorld(t, rdb, Options{})
	ctx := context.Background()
	w.populate(ctx)
	_, ids := w.jobs(ctx)
	k := w.key("Jobs", "acme")
	sub := func(s string) string { return keys.Sub(k, s) }
	ready := func() []string { return rdb.LRange(ctx, k, 0, -1).Val() }
	check := func(what string, r ItemResult, err error, was string, done, refused bool) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.Was != was || r.Done != done || r.Refused() != refused || r.Key != k {
			t.Errorf("%s = %+v (refused %v), want was %q, done %v, refused %v", what, r, r.Refused(), was, done, refused)
		}
		if r.String() == "" {
			t.Errorf("%s: no text", what)
		}
	}

	// Remove a ready item: only it leaves, with its body.
	three := ids[`"three"`]
	r, err := w.in.RemoveItem(ctx, three, "Jobs", "acme")
	check("RemoveItem(ready)", r, err, ItemReady, true, false)
	if got := ready(); len(got) != 1 || got[0] != ids[`"four"`] {
		t.Errorf("ready list after the remove: %v, want only four's id", got)
	}
	if rdb.HExists(ctx, sub("data"), three).Val() {
		t.Error("the removed item's body is still in Redis")
	}
	r, err = w.in.RemoveItem(ctx, three, "Jobs", "acme")
	check("RemoveItem(ready) again", r, err, "", false, false)
	if !strings.Contains(r.String(), "nothing changed") {
		t.Errorf("second remove says %q", r)
	}

	// An item in flight is not removed.
	one := ids[`"one"`]
	r, err = w.in.RemoveItem(ctx, one, "Jobs", "acme")
	check("RemoveItem(in flight)", r, err, ItemInFlight, false, true)
	if rdb.ZScore(ctx, sub("inflight"), one).Err() != nil || !rdb.HExists(ctx, sub("data"), one).Val() {
		t.Error("the delivery in flight was touched")
	}

	// Redrive the dead letter by id: it goes to the end of the ready list
	// with its count reset; again, it is ready already.
	two := ids[`"two"`]
	r, err = w.in.RedriveItem(ctx, ids[`"later"`], "Jobs", "acme")
	check("RedriveItem(delayed)", r, err, ItemDelayed, false, true)
	r, err = w.in.RedriveItem(ctx, two, "Jobs", "acme")
	check("RedriveItem(dead)", r, err, ItemDead, true, false)
	if got := ready(); len(got) != 2 || got[1] != two {
		t.Errorf("ready list after the redrive: %v, want four's id then %s", got, two)
	}
	if rdb.LLen(ctx, sub("dead")).Val() != 0 || rdb.HExists(ctx, sub("att"), two).Val() || rdb.HExists(ctx, sub("err"), two).Val() {
		t.Error("the redriven item is still dead, or keeps its count or reason")
	}
	r, err = w.in.RedriveItem(ctx, two, "Jobs", "acme")
	check("RedriveItem(dead) again", r, err, ItemReady, false, false)

	// Run the delayed item now.
	later := ids[`"later"`]
	r, err = w.in.RunItemNow(ctx, two, "Jobs", "acme")
	check("RunItemNow(ready)", r, err, ItemReady, false, false)
	r, err = w.in.RunItemNow(ctx, later, "Jobs", "acme")
	check("RunItemNow(delayed)", r, err, ItemDelayed, true, false)
	if got := ready(); len(got) != 3 || got[2] != later || rdb.ZCard(ctx, sub("delayed")).Val() != 0 {
		t.Errorf("ready list after run-now: %v, want later's id last, and nothing delayed", got)
	}
	r, err = w.in.RunItemNow(ctx, later, "Jobs", "acme")
	check("RunItemNow(delayed) again", r, err, ItemReady, false, false)

	// A consumer takes them in that order, with their bodies.
	jobs := lockimpl.NewDelayedReliableQueue[string](w.rt("beta"), defs.Queue(w.in.byNm["Jobs"].obj.(*spec.Queue)), runtime.JSON[string]{}, k)
	var got []string
	for range 3 {
		d := must[*runtime.Delivery[string]](t)(jobs.TryTake(ctx, time.Second))
		got = append(got, d.Value+"="+d.ID())
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if want := "four=" + ids[`"four"`] + " two=" + two + " later=" + later; strings.Join(got, " ") != want {
		t.Errorf("taken %v, want %s", got, want)
	}

	// Unknown ids, objects, params and kinds.
	r, err = w.in.RemoveItem(ctx, "alpha.zzz", "Jobs", "acme")
	check("RemoveItem(unknown)", r, err, "", false, false)
	if !strings.Contains(r.String(), "no item alpha.zzz of "+k) {
		t.Errorf("unknown id says %q", r)
	}
	if _, err := w.in.RemoveItem(ctx, "", "Jobs", "acme"); !errors.Is(err, ErrNoID) {
		t.Errorf("RemoveItem without id = %v, want ErrNoID", err)
	}
	if _, err := w.in.RemoveItem(ctx, "x", "Order", "42"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("RemoveItem of a lock = %v, want ErrUnsupported", err)
	}
	if _, err := w.in.RedriveItem(ctx, "x", "Nope"); !errors.Is(err, ErrUnknownObject) {
		t.Errorf("RedriveItem of Nope = %v, want ErrUnknownObject", err)
	}
	if _, err := w.in.Item(ctx, "x", "Jobs"); !errors.Is(err, ErrBadParams) {
		t.Errorf("Item without params = %v, want ErrBadParams", err)
	}
}

// TestItemActionRecord: the runtime's item script (queue_item, which the
// item actions run) sent again as the same operation (a lost reply)
// answers what its first run did, not "no item".
func TestItemActionRecord(t *testing.T) {
	rdb := redistest.Single(t).Client()
	w := newWorld(t, rdb, Options{})
	ctx := context.Background()
	w.populate(ctx)
	_, ids := w.jobs(ctx)
	k := w.key("Jobs", "acme")
	src, err := templates.Source("queue_item")
	if err != nil {
		t.Fatal(err)
	}
	ks := append(queueKeyList(k), keys.Sub(k, "takers"), keys.Sub(k, "op:inspect-test"))
	for i := range 2 {
		res, err := redis.NewScript(src).Run(ctx, rdb, ks, "publish", "r", ActionRemove, ids[`"three"`], "", 60000).Slice()
		if err != nil || len(res) != 2 || res[0] != ItemReady || res[1] != int64(1) {
			t.Errorf("run %d = %v, %v; want [ready 1]", i+1, res, err)
		}
	}
	if ttl := rdb.PTTL(ctx, ks[11]).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("the record's TTL is %v, want in (0, 1m]", ttl)
	}
}

// TestBuryItemAndPause: BuryItem moves a ready or a delayed item to the
// dead letters with its reason (and refuses one in flight), RedriveItem
// brings it back; Pause shows the queue paused and offers Resume, a
// runtime Take takes nothing until Resume; an item enqueued under a
// unique key shows it; retention shows an acknowledged item as done.
func TestBuryItemAndPause(t *testing.T) {
	rdb := redistest.Single(t).Client()
	in, err := Parse(rdb, "bury.yaml", []byte(`version: 1
package: p
namespace: bu
queues:
  Jobs:
    key: "jobs"
    payload: string
    delay: true
    reliable: { visibility: 1m }
    unique: 1h
    retention: { for: 1h, max: 10 }
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx := context.Background()
	c := runtime.New(rdb)
	defer c.Close()
	k := must[string](t)(in.Key("Jobs"))
	q := lockimpl.NewDelayedReliableQueue[string](c, defs.Queue(in.byNm["Jobs"].obj.(*spec.Queue)), runtime.JSON[string]{}, k)
	ready := must[string](t)(q.Enqueue(ctx, "ready", runtime.Unique("order-7")))
	later := must[string](t)(q.Enqueue(ctx, "later", runtime.After(time.Hour)))
	inst := must[*Instance](t)(in.Instance(ctx, "Jobs"))
	if it := inst.Queue.ReadyItems; len(it) != 1 || it[0].Unique != "order-7" || !strings.Contains(ViewOf(inst).Items[0].Text, `[unique "order-7"]`) {
		t.Fatalf("ready items %+v, view %+v: want the unique key shown", it, ViewOf(inst).Items)
	}
	for _, id := range []string{ready, later} {
		r, err := in.BuryItem(ctx, id, "", "Jobs")
		if err != nil || !r.Done || r.Refused() {
			t.Fatalf("BuryItem(%s) = %+v, %v", id, r, err)
		}
		if r, err := in.BuryItem(ctx, id, "", "Jobs"); err != nil || r.Done || r.Refused() || r.Was != ItemDead {
			t.Fatalf("BuryItem(%s) again = %+v, %v; want dead already", id, r, err)
		}
	}
	inst = must[*Instance](t)(in.Instance(ctx, "Jobs"))
	if d := inst.Queue.DeadLetters; len(d) != 2 || d[0].Reason != DefaultBuryReason || d[0].Unique != "order-7" {
		t.Fatalf("dead letters %+v", d)
	}
	if r, err := in.RedriveItem(ctx, ready, "Jobs"); err != nil || !r.Done {
		t.Fatalf("RedriveItem = %+v, %v", r, err)
	}
	d, err := q.TryTake(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := in.BuryItem(ctx, d.ID(), "x", "Jobs"); err != nil || !r.Refused() || r.Was != ItemInFlight {
		t.Fatalf("BuryItem of a delivery in flight = %+v, %v; want refused", r, err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	// Retention keeps the acknowledged item: shown as done.
	inst = must[*Instance](t)(in.Instance(ctx, "Jobs"))
	if c := inst.Queue.Completed; len(c) != 1 || c[0].ID != ready || c[0].State != ItemDone || c[0].Body != `"ready"` || c[0].Unique != "order-7" || c[0].DoneAgoMs == nil {
		t.Fatalf("completed %+v", c)
	}
	if v := ViewOf(inst); !slices.ContainsFunc(v.Items, func(it ViewItem) bool { return it.State == ItemDone && strings.HasPrefix(it.Text, "done ") }) {
		t.Fatalf("the view shows no done item: %+v", v.Items)
	}

	if err := in.Pause(ctx, "Jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Offer(ctx, "while paused"); err != nil {
		t.Fatal(err)
	}
	inst = must[*Instance](t)(in.Instance(ctx, "Jobs"))
	if !inst.Queue.Paused || inst.Queue.PausedForMs == nil || !strings.HasPrefix(ViewOf(inst).State, "PAUSED") {
		t.Fatalf("paused queue: %+v, state %q", inst.Queue, ViewOf(inst).State)
	}
	if !slices.ContainsFunc(ViewOf(inst).Actions, func(o Offer) bool { return o.Action == "resume" }) {
		t.Fatalf("a paused queue offers %+v, want resume", ViewOf(inst).Actions)
	}
	if _, err := q.TryTake(ctx, 0); !errors.Is(err, runtime.ErrEmpty) {
		t.Fatalf("TryTake of a paused queue: %v", err)
	}
	if err := in.Resume(ctx, "Jobs"); err != nil {
		t.Fatal(err)
	}
	if d, err := q.TryTake(ctx, 0); err != nil || d.Value != "while paused" {
		t.Fatalf("TryTake after Resume: %v, %v", d, err)
	}
	inst = must[*Instance](t)(in.Instance(ctx, "Jobs"))
	if inst.Queue.Paused || !slices.ContainsFunc(ViewOf(inst).Actions, func(o Offer) bool { return o.Action == "pause" }) {
		t.Fatalf("a resumed queue: %+v, offers %+v", inst.Queue, ViewOf(inst).Actions)
	}
	if err := in.Pause(ctx, "Order"); err == nil {
		t.Fatal("Pause of an unknown object")
	}
}

// TestPlainQueueItems: a plain delayed queue's delayed items have ids (its
// ready ones do not); run now, one becomes a ready body.
func TestPlainQueueItems(t *testing.T) {
	rdb := redistest.Single(t).Client()
	in, err := Parse(rdb, "plain.yaml", []byte(`version: 1
package: p
namespace: pl
queues:
  Mail:
    key: "mail"
    payload: string
    delay: true
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx := context.Background()
	c := runtime.New(rdb)
	defer c.Close()
	k := must[string](t)(in.Key("Mail"))
	q := lockimpl.NewDelayedQueue[string](c, defs.Queue(in.byNm["Mail"].obj.(*spec.Queue)), runtime.JSON[string]{}, k)
	for _, s := range []string{"now"} {
		if err := q.Offer(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"a", "b"} {
		if err := q.OfferIn(ctx, s, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	inst := must[*Instance](t)(in.Instance(ctx, "Mail"))
	qs := inst.Queue
	if len(qs.ReadyItems) != 1 || qs.ReadyItems[0].ID != "" || qs.ReadyItems[0].Body != `"now"` || len(qs.DelayedItems) != 2 {
		t.Fatalf("plain queue: ready %+v, delayed %+v", qs.ReadyItems, qs.DelayedItems)
	}
	a, b := qs.DelayedItems[0], qs.DelayedItems[1]
	if r, err := in.RunItemNow(ctx, a.ID, "Mail"); err != nil || !r.Done {
		t.Fatalf("RunItemNow(%s) = %+v, %v", a.ID, r, err)
	}
	if got := rdb.LRange(ctx, k, 0, -1).Val(); len(got) != 2 || !strings.HasSuffix(got[1], `"a"`) {
		t.Errorf("ready list %q, want now's body then a's", got)
	}
	if rdb.HLen(ctx, keys.Sub(k, "data")).Val() != 1 {
		t.Error("the item run now left its body in data")
	}
	// It has no id any more: the same id is no item.
	if r, err := in.RunItemNow(ctx, a.ID, "Mail"); err != nil || r.Done || r.Was != "" {
		t.Errorf("RunItemNow(%s) again = %+v, %v", a.ID, r, err)
	}
	if r, err := in.RemoveItem(ctx, b.ID, "Mail"); err != nil || !r.Done || r.Was != ItemDelayed {
		t.Errorf("RemoveItem(%s) = %+v, %v", b.ID, r, err)
	}
	if n := rdb.ZCard(ctx, keys.Sub(k, "delayed")).Val() + rdb.HLen(ctx, keys.Sub(k, "data")).Val(); n != 0 {
		t.Errorf("%d delayed items or bodies left", n)
	}
}
