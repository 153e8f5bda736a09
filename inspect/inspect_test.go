package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
)

var update = flag.Bool("update", false, "rewrite the golden files")

// world holds objects of every kind through the runtime, the way
// generated code does: the runtime definitions inspect derives from the
// spec, and keys built from the spec's patterns.
type world struct {
	t   *testing.T
	in  *Inspector
	rdb redis.UniversalClient
	rts map[string]*runtime.Client
}

func newWorld(t *testing.T, rdb redis.UniversalClient, opts Options) *world {
	t.Helper()
	in, err := Load(rdb, "testdata/shop.yaml", opts)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, in: in, rdb: rdb, rts: map[string]*runtime.Client{}}
	t.Cleanup(func() {
		for _, c := range w.rts {
			c.Close()
		}
		in.Close()
	})
	return w
}

// rt returns the runtime client of the given id.
func (w *world) rt(id string) *runtime.Client {
	if w.rts[id] == nil {
		w.rts[id] = runtime.New(w.rdb, runtime.WithID(id))
	}
	return w.rts[id]
}

func (w *world) key(object string, values ...string) string {
	w.t.Helper()
	k, err := w.in.Key(object, values...)
	if err != nil {
		w.t.Fatal(err)
	}
	return k
}

func (w *world) lock(client, object string, values ...string) *runtime.Lock {
	return lockimpl.NewLock(w.rt(client), lockDef(w.in.byNm[object].obj.(*spec.Lock)), w.key(object, values...))
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// populate takes, holds and fills something of every kind.
func (w *world) populate(ctx context.Context) {
	t := w.t
	lease := must[*runtime.Lease](t)
	first := lease(w.lock("alpha", "Order", "42").Lock(ctx))
	lease(w.lock("alpha", "Order", "42").Lock(first.Context())) // re-entry: 2 holds
	lease(w.lock("alpha", "Doc", "a").Lock(ctx))
	lease(w.lock("beta", "Job", "acme", "mon").Lock(ctx))
	rw := func(client string) *runtime.RWLock {
		return lockimpl.NewRWLock(w.rt(client), lockDef(w.in.byNm["Rates"].obj.(*spec.Lock)), w.key("Rates", "EUR"))
	}
	lease(rw("alpha").Read().Lock(ctx))
	lease(rw("beta").Read().Lock(ctx))
	lease(w.lock("alpha", "Line", "1").Lock(ctx))
	sem := lockimpl.NewSemaphore(w.rt("alpha"), defs.Semaphore(w.in.byNm["Export"].obj.(*spec.Semaphore)), w.key("Export", "acme"))
	must[*runtime.Permit](t)(sem.Acquire(ctx, 3))
	latch := lockimpl.NewLatch(w.rt("alpha"), &lockimpl.LatchDef{Name: "Warmup", Count: 3, Expire: time.Hour, Scripts: lockimpl.Scripts().Latches()}, w.key("Warmup", "j1"))
	must[int](t)(latch.CountDown(ctx))
	api := lockimpl.NewLimiter(w.rt("alpha"), defs.Limiter(w.in.byNm["API"].obj.(*spec.Limiter)), w.key("API", "u1"))
	for range 2 {
		if r := must[runtime.LimitResult](t)(api.Allow(ctx)); !r.Allowed {
			t.Fatal("API limiter denied a request")
		}
	}
	for _, c := range []string{"alpha", "beta"} {
		mine := lockimpl.NewLimiter(w.rt(c), defs.Limiter(w.in.byNm["Mine"].obj.(*spec.Limiter)), w.key("Mine", "u1"))
		must[runtime.LimitResult](t)(mine.Allow(ctx))
	}
	q := lockimpl.NewDelayedReliableQueue[string](w.rt("alpha"), defs.Queue(w.in.byNm["Jobs"].obj.(*spec.Queue)), runtime.JSON[string]{}, w.key("Jobs", "acme"))
	for _, s := range []string{"one", "two", "three", "four"} {
		if _, err := q.Offer(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.OfferIn(ctx, "later", time.Hour); err != nil {
		t.Fatal(err)
	}
	take := must[*runtime.Delivery[string]](t)
	take(q.Take(ctx)) // "one" stays in flight
	d := take(q.Take(ctx))
	if err := d.Nack(ctx, errors.New("bad input")); err != nil { // maxDeliveries 1: dead
		t.Fatal(err)
	}
}

// normalize checks the times are plausible and zeroes them, so that the
// rest compares with a golden file.
func normalize(t *testing.T, insts []*Instance) {
	t.Helper()
	ms := func(what string, v *int64, max time.Duration) {
		if *v <= 0 || *v > max.Milliseconds() {
			t.Errorf("%s = %dms, want in (0, %v]", what, *v, max)
		}
		*v = 0
	}
	for _, in := range insts {
		switch {
		case in.Lock != nil:
			for i := range in.Lock.Holders {
				ms(in.Key+" holder TTL", &in.Lock.Holders[i].TTLMs, 30*time.Second)
			}
			for i := range in.Lock.Waiters {
				ms(in.Key+" waiter TTL", &in.Lock.Waiters[i].TTLMs, time.Minute)
			}
		case in.Semaphore != nil:
			for i := range in.Semaphore.Holders {
				ms(in.Key+" permit TTL", &in.Semaphore.Holders[i].TTLMs, 30*time.Second)
			}
		case in.Latch != nil:
			if in.Latch.Set {
				ms(in.Key+" latch TTL", &in.Latch.TTLMs, time.Hour)
			}
		case in.Limiter != nil:
			for i := range in.Limiter.Clients {
				ms(in.Key+" reset", &in.Limiter.Clients[i].ResetAfterMs, time.Minute)
			}
		case in.Queue != nil:
			if in.Queue.NextDueMs != nil {
				ms(in.Key+" next due", in.Queue.NextDueMs, time.Hour)
			}
			for i := range in.Queue.Deliveries {
				ms(in.Key+" deadline", &in.Queue.Deliveries[i].DeadlineMs, time.Minute)
				in.Queue.Deliveries[i].ID = stableID(t, in.Queue.Deliveries[i].ID)
			}
			for i := range in.Queue.DeadLetters {
				in.Queue.DeadLetters[i].ID = stableID(t, in.Queue.DeadLetters[i].ID)
			}
			for i := range in.Queue.ReadyItems {
				in.Queue.ReadyItems[i].ID = stableID(t, in.Queue.ReadyItems[i].ID)
			}
			for i := range in.Queue.DelayedItems {
				ms(in.Key+" item due", in.Queue.DelayedItems[i].DueMs, time.Hour)
				in.Queue.DelayedItems[i].ID = stableID(t, in.Queue.DelayedItems[i].ID)
			}
		}
	}
}

// stableID drops the time from an item id "<ms>-<seq>" (the runtime's
// ids), keeping the sequence number.
func stableID(t *testing.T, id string) string {
	t.Helper()
	if id == "" {
		t.Error("an item without id")
	}
	if _, seq, ok := strings.Cut(id, "-"); ok {
		return seq
	}
	return id
}

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n%s", path, got)
	}
}

// TestSnapshotEveryKind holds objects of every kind on a real Redis and
// compares inspect's view of them (params decoded from scanned keys) with
// a golden -json file.
func TestSnapshotEveryKind(t *testing.T) {
	node := redistest.Single(t)
	rdb := node.Client()
	w := newWorld(t, rdb, Options{})
	ctx := context.Background()
	w.populate(ctx)

	snap, err := w.in.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []*Instance
	for _, o := range snap.Objects {
		all = append(all, o.Instances...)
	}
	normalize(t, all)
	golden(t, "snapshot.json", snap)

	// One object's listing, and one instance by params, agree with it.
	l, err := w.in.Instances(ctx, "Order")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Instances) != 1 || l.Instances[0].Params[0].Value != "42" || l.Instances[0].Lock.Holders[0].Holds != 2 {
		t.Errorf("Instances(Order) = %+v", l.Instances)
	}
	inst, err := w.in.Instance(ctx, "Mine", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(inst.Limiter.Clients); got != 2 {
		t.Errorf("Instance(Mine, u1) has %d client allowances, want 2: %+v", got, inst.Limiter)
	}
	if _, err := w.in.Instance(ctx, "Order", "x"); !errors.Is(err, ErrBadParams) {
		t.Errorf("Instance(Order, x) = %v, want ErrBadParams", err)
	}
	if _, err := w.in.Instance(ctx, "Nope"); !errors.Is(err, ErrUnknownObject) {
		t.Errorf("Instance(Nope) = %v, want ErrUnknownObject", err)
	}
}

// TestActions force-unlocks, redrives, sets permits and purges through
// the inspector, and checks Redis and the holders see it.
func TestActions(t *testing.T) {
	node := redistest.Single(t)
	rdb := node.Client()
	w := newWorld(t, rdb, Options{})
	ctx := context.Background()
	w.populate(ctx)

	// A waiter for the lock gets it once it is force-unlocked.
	got := make(chan error, 1)
	go func() {
		le, err := w.lock("beta", "Order", "42").TryLock(ctx, 20*time.Second)
		if err == nil {
			err = le.Unlock(ctx)
		}
		got <- err
	}()
	if held, err := w.in.ForceUnlock(ctx, "Order", "42"); err != nil || !held {
		t.Fatalf("ForceUnlock(Order 42) = %v, %v; want true", held, err)
	}
	if err := <-got; err != nil {
		t.Errorf("the waiter did not get the force-unlocked lock: %v", err)
	}
	if held, err := w.in.ForceUnlock(ctx, "Rates", "EUR"); err != nil || !held {
		t.Fatalf("ForceUnlock(Rates EUR) = %v, %v; want true", held, err)
	}
	if held, err := w.in.ForceUnlock(ctx, "Line", "1"); err != nil || !held {
		t.Fatalf("ForceUnlock(Line 1) = %v, %v; want true", held, err)
	}
	for _, o := range []string{"Rates", "Line"} {
		v := "EUR"
		if o == "Line" {
			v = "1"
		}
		inst, err := w.in.Instance(ctx, o, v)
		if err != nil || inst.Lock.Held {
			t.Errorf("%s after ForceUnlock: %+v, %v", o, inst.Lock, err)
		}
	}
	if _, err := w.in.ForceUnlock(ctx, "Export", "acme"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("ForceUnlock(a semaphore) = %v, want ErrUnsupported", err)
	}

	n, err := w.in.Redrive(ctx, 0, "Jobs", "acme")
	if err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v; want 1", n, err)
	}
	inst, err := w.in.Instance(ctx, "Jobs", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if q := inst.Queue; q.Dead != 0 || q.Ready != 3 || q.InFlight != 1 || q.Delayed != 1 {
		t.Errorf("after Redrive: %+v, want 3 ready, 1 delayed, 1 in flight, 0 dead", q)
	}

	if err := w.in.SetPermits(ctx, 10, "Export", "acme"); err != nil {
		t.Fatal(err)
	}
	inst, err = w.in.Instance(ctx, "Export", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if s := inst.Semaphore; s.Capacity != 10 || s.Free != 7 || !s.CapacitySet {
		t.Errorf("after SetPermits(10): %+v, want capacity 10, 7 free", s)
	}
	if err := w.in.SetPermits(ctx, 0, "Export", "acme"); err != nil {
		t.Fatal(err)
	}
	if inst, _ = w.in.Instance(ctx, "Export", "acme"); inst.Semaphore.Capacity != 4 {
		t.Errorf("after SetPermits(0): capacity %d, want the spec's 4", inst.Semaphore.Capacity)
	}

	if did, err := w.in.Purge(ctx, "Jobs", "acme"); err != nil || !did {
		t.Fatalf("Purge = %v, %v", did, err)
	}
	inst, err = w.in.Instance(ctx, "Jobs", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if q := inst.Queue; q.Ready+q.Delayed+q.InFlight+q.Dead != 0 {
		t.Errorf("after Purge: %+v, want empty", q)
	}
}

// TestWaitForCycle builds a real distributed deadlock: two clients each
// hold one fair lock and wait, with their lease's context (one owner), for
// the other's. The graph names both owners, both keys, and the cycle.
func TestWaitForCycle(t *testing.T) {
	node := redistest.Single(t)
	w := newWorld(t, node.Client(), Options{})
	ctx := context.Background()
	a := must[*runtime.Lease](t)(w.lock("alpha", "Line", "1").Lock(ctx))
	b := must[*runtime.Lease](t)(w.lock("beta", "Line", "2").Lock(ctx))
	waitCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{}, 2)
	go func() { w.lock("alpha", "Line", "2").Lock(waitCtxOf(waitCtx, a)); done <- struct{}{} }()
	go func() { w.lock("beta", "Line", "1").Lock(waitCtxOf(waitCtx, b)); done <- struct{}{} }()

	var g *Graph
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if g, err = w.in.WaitFor(ctx); err != nil {
			t.Fatal(err)
		}
		if len(g.Edges) == 2 {
			break
		}
	}
	cancel()
	<-done
	<-done
	if len(g.Edges) != 2 || len(g.Cycles) != 1 {
		t.Fatalf("graph = %+v, want 2 edges in one cycle", g)
	}
	c := g.Cycles[0]
	want := []Edge{
		{Waiter: "alpha:1", WaiterClient: "alpha", Holder: "beta:1", HolderClient: "beta", Object: "Line", Key: "shop:{Line:line:2}"},
		{Waiter: "beta:1", WaiterClient: "beta", Holder: "alpha:1", HolderClient: "alpha", Object: "Line", Key: "shop:{Line:line:1}"},
	}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Errorf("cycle = %+v, want %+v", c, want)
	}
}

// waitCtxOf is the lease's context (its owner), cancelled with stop.
func waitCtxOf(stop context.Context, le *runtime.Lease) context.Context {
	ctx, cancel := context.WithCancel(le.Context())
	context.AfterFunc(stop, cancel)
	return ctx
}

// TestCycles checks cycle finding on graphs built by hand.
func TestCycles(t *testing.T) {
	e := func(w, h string) Edge { return Edge{Waiter: w, Holder: h} }
	cases := []struct {
		edges []Edge
		want  string
	}{
		{nil, "[]"},
		{[]Edge{e("a", "b"), e("b", "c")}, "[]"},
		{[]Edge{e("a", "b"), e("b", "a")}, "[[a>b b>a]]"},
		{[]Edge{e("a", "a")}, "[[a>a]]"},
		{[]Edge{e("c", "a"), e("a", "b"), e("b", "c"), e("d", "a")}, "[[a>b b>c c>a]]"},
		{[]Edge{e("a", "b"), e("b", "a"), e("x", "y"), e("y", "z"), e("z", "x"), e("y", "x")}, "[[a>b b>a] [x>y y>x]]"},
	}
	for _, tc := range cases {
		var parts []string
		for _, c := range Cycles(tc.edges) {
			var s []string
			for _, e := range c {
				s = append(s, e.Waiter+">"+e.Holder)
			}
			parts = append(parts, "["+strings.Join(s, " ")+"]")
		}
		if got := "[" + strings.Join(parts, " ") + "]"; got != tc.want {
			t.Errorf("Cycles(%v) = %s, want %s", tc.edges, got, tc.want)
		}
	}
}

// TestClusterScan lists instances spread over every primary of a
// 3-primary cluster.
func TestClusterScan(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	rdb := cl.Client()
	w := newWorld(t, rdb, Options{})
	ctx := context.Background()
	slots := map[int]bool{}
	for i := range 30 {
		l := w.lock("alpha", "Order", fmt.Sprint(i))
		must[*runtime.Lease](t)(l.Lock(ctx))
		slots[keys.Slot(l.Key())] = true
	}
	l, err := w.in.Instances(ctx, "Order")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Instances) != 30 || l.Truncated {
		t.Fatalf("Instances(Order) on a cluster: %d (truncated %v), want 30", len(l.Instances), l.Truncated)
	}
	for _, inst := range l.Instances {
		if !inst.Lock.Held || inst.Lock.Holders[0].Client != "alpha" {
			t.Errorf("%s: %+v", inst.Key, inst.Lock)
		}
	}
	if len(slots) < 3 {
		t.Errorf("the keys used %d slots; the test wants them spread", len(slots))
	}
}

// TestScanBudget cuts a listing short on a keyspace larger than the
// budget and says so.
func TestScanBudget(t *testing.T) {
	node := redistest.Single(t)
	rdb := node.Client()
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for i := range 5000 {
		pipe.Set(ctx, fmt.Sprintf("other:%d", i), "x", time.Hour)
	}
	for i := range 3 {
		pipe.Set(ctx, keys.Build("shop", "Order", []string{"order:", ""}, fmt.Sprint(i)), "alpha:1 1", time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	small := newWorld(t, rdb, Options{MaxScan: 1000})
	l, err := small.in.Instances(ctx, "Order")
	if err != nil {
		t.Fatal(err)
	}
	if !l.Truncated {
		t.Errorf("a 1000-key budget over 5003 keys was not truncated (%d instances)", len(l.Instances))
	}
	full := newWorld(t, rdb, Options{})
	if l, err = full.in.Instances(ctx, "Order"); err != nil || len(l.Instances) != 3 || l.Truncated {
		t.Errorf("full scan: %d instances, truncated %v, %v; want 3", len(l.Instances), l.Truncated, err)
	}
	limited := newWorld(t, rdb, Options{MaxInstances: 2})
	if l, err = limited.in.Instances(ctx, "Order"); err != nil || len(l.Instances) != 2 || !l.Truncated {
		t.Errorf("MaxInstances 2: %d instances, truncated %v, %v", len(l.Instances), l.Truncated, err)
	}
}

func TestSplitKey(t *testing.T) {
	for _, tc := range []struct{ key, base, suffix, obj string }{
		{"shop:{Order:order:42}", "shop:{Order:order:42}", "", "Order"},
		{"shop:{Doc:doc:a}:fence", "shop:{Doc:doc:a}", "fence", "Doc"},
		{"shop:{Mine:mine:u}:token-bucket:alpha", "shop:{Mine:mine:u}", "token-bucket:alpha", "Mine"},
		{"shop:{Migration:migration}", "shop:{Migration:migration}", "", "Migration"},
	} {
		base, suffix, obj, ok := splitKey("shop", tc.key)
		if !ok || base != tc.base || suffix != tc.suffix || obj != tc.obj {
			t.Errorf("splitKey(%q) = %q %q %q %v", tc.key, base, suffix, obj, ok)
		}
	}
	for _, k := range []string{"shop:{x}", "shop:{Order:1}x", "other:{Order:1}", "shop:Order:1"} {
		if _, _, _, ok := splitKey("shop", k); ok {
			t.Errorf("splitKey(%q) accepted", k)
		}
	}
}

func TestDial(t *testing.T) {
	for _, tc := range []struct {
		url  string
		kind string
	}{
		{"redis://localhost:6379/2", "*redis.Client"},
		{"redis-sentinel://a:26379,b:26380/mymaster/1", "*redis.Client"},
		{"redis-cluster://a:7000,b:7001", "*redis.ClusterClient"},
	} {
		c, err := Dial(tc.url)
		if err != nil {
			t.Errorf("Dial(%q): %v", tc.url, err)
			continue
		}
		if got := fmt.Sprintf("%T", c); got != tc.kind {
			t.Errorf("Dial(%q) = %s, want %s", tc.url, got, tc.kind)
		}
		c.Close()
	}
	for _, bad := range []string{"localhost:6379", "http://x", "redis-sentinel://a:1", "redis-cluster://", "redis-cluster://a:1/3"} {
		if c, err := Dial(bad); err == nil {
			c.Close()
			t.Errorf("Dial(%q) accepted", bad)
		}
	}
}

// TestIdentityKeys checks that an object with id: is found on the keys
// its generated code uses: the id's, not the Go name's.
func TestIdentityKeys(t *testing.T) {
	in, err := Parse(nil, "ids.yaml", []byte("version: 1\npackage: p\nnamespace: shop\nlocks:\n  OrderMutex: { id: Order, key: \"order:{id}\", params: { id: int64 } }\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := in.Key("OrderMutex", "7")
	if want := keys.Build("shop", "Order", []string{"order:", ""}, "7"); err != nil || got != want {
		t.Errorf("Key(OrderMutex, 7) = %q, %v; want %q", got, err, want)
	}
}

// traceparent is an ItemPropagator that makes every offered item carry a
// fixed traceparent, as the OpenTelemetry adapter does with its span's.
type traceparent string

func (traceparent) Start(ctx context.Context, _ runtime.Op) (context.Context, func(error)) {
	return ctx, func(error) {}
}
func (traceparent) Event(context.Context, runtime.Event) {}
func (p traceparent) InjectItem(_ context.Context, fields map[string]string) {
	fields["traceparent"] = string(p)
}
func (traceparent) ExtractItem(ctx context.Context, _ map[string]string) context.Context { return ctx }

// TestDeadLetterCarried: a dead letter is shown out of its envelope (the
// codec's bytes and tag), with what it carries from its producer (the
// traceparent an operator follows to the trace that offered it), in
// -json and in the table.
func TestDeadLetterCarried(t *testing.T) {
	rdb := redistest.Single(t).Client()
	w := newWorld(t, rdb, Options{})
	ctx := context.Background()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	producer := runtime.New(rdb, runtime.WithObserver(traceparent(tp)))
	defer producer.Close()
	def := defs.Queue(w.in.byNm["Jobs"].obj.(*spec.Queue))
	k := w.key("Jobs", "traced")
	if _, err := lockimpl.NewDelayedReliableQueue(producer, def, runtime.JSON[string]{}, k).Offer(ctx, "poison"); err != nil {
		t.Fatal(err)
	}
	d := must[*runtime.Delivery[string]](t)(lockimpl.NewDelayedReliableQueue(w.rt("alpha"), def, runtime.JSON[string]{}, k).Take(ctx))
	if err := d.Bury(ctx, errors.New("unparseable")); err != nil {
		t.Fatal(err)
	}
	inst, err := w.in.Instance(ctx, "Jobs", "traced")
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.Queue.DeadLetters) != 1 {
		t.Fatalf("dead letters: %+v", inst.Queue.DeadLetters)
	}
	dl := inst.Queue.DeadLetters[0]
	if dl.Body != `"poison"` || dl.Codec != "j" || dl.Carried["traceparent"] != tp || len(dl.Carried) != 1 {
		t.Errorf("dead letter %+v; want body \"poison\", codec j, carried traceparent %s", dl, tp)
	}
	var b strings.Builder
	WriteInstance(&b, inst)
	if !strings.Contains(b.String(), "CARRIED") || !strings.Contains(b.String(), `"poison"  traceparent=`+tp) {
		t.Errorf("the table does not show the carried traceparent:\n%s", b.String())
	}
}

// TestParamlessInstances: an object without params counts as an instance
// in the snapshot only while one of its keys exists; named, it is read
// either way.
func TestParamlessInstances(t *testing.T) {
	rdb := redistest.Single(t).Client()
	w := newWorld(t, rdb, Options{})
	ctx := context.Background()
	count := func() (int, int) {
		t.Helper()
		snap, err := w.in.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range snap.Objects {
			if o.Name == "Migration" {
				return o.Count, o.Held
			}
		}
		t.Fatal("no Migration in the snapshot")
		return 0, 0
	}
	if n, held := count(); n != 0 || held != 0 {
		t.Errorf("without keys: %d instances, %d held; want 0, 0", n, held)
	}
	if l, err := w.in.Instances(ctx, "Migration"); err != nil || len(l.Instances) != 1 || l.Instances[0].Lock.Held {
		t.Errorf("Instances(Migration) without keys = %+v, %v; want its one free instance", l, err)
	}
	lease := must[*runtime.Lease](t)(w.lock("alpha", "Migration").Lock(ctx))
	if n, held := count(); n != 1 || held != 1 {
		t.Errorf("held: %d instances, %d held; want 1, 1", n, held)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := count(); n != 0 {
		t.Errorf("released: %d instances, want 0", n)
	}
}

// TestCompactHolds: the single holds the fast paths take without their
// auxiliary keys (a read-write lock's hash alone, a semaphore's counts
// alone: see rw_acquire and semaphore_acquire) read as the holds they
// are, with their TTLs.
func TestCompactHolds(t *testing.T) {
	node := redistest.Single(t)
	w := newWorld(t, node.Client(), Options{})
	ctx := context.Background()
	rw := lockimpl.NewRWLock(w.rt("alpha"), lockDef(w.in.byNm["Rates"].obj.(*spec.Lock)), w.key("Rates", "USD"))
	must[*runtime.Lease](t)(rw.Write().Lock(ctx))
	if n, err := node.Client().Exists(ctx, w.key("Rates", "USD")+":holds").Result(); err != nil || n != 0 {
		t.Fatalf("the write hold has a holds key (%d, %v): not the compact form", n, err)
	}
	inst, err := w.in.Instance(ctx, "Rates", "USD")
	if err != nil {
		t.Fatal(err)
	}
	if l := inst.Lock; !l.Held || len(l.Holders) != 1 || l.Holders[0].Side != "write" || l.Holders[0].TTLMs <= 0 {
		t.Errorf("compact write hold read as %+v", l)
	}
	sem := lockimpl.NewSemaphore(w.rt("alpha"), defs.Semaphore(w.in.byNm["Export"].obj.(*spec.Semaphore)), w.key("Export", "compact"))
	must[*runtime.Permit](t)(sem.Acquire(ctx, 1))
	if inst, err = w.in.Instance(ctx, "Export", "compact"); err != nil {
		t.Fatal(err)
	}
	if s := inst.Semaphore; s.Held != 1 || len(s.Holders) != 1 || s.Holders[0].Permits != 1 || s.Holders[0].TTLMs <= 0 || s.Free != s.Capacity-1 {
		t.Errorf("compact permit read as %+v", s)
	}
}
