package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/examples/orderclose/orders"
	"github.com/lockgen/lockgen/examples/orderclose/shopqueues"
	"github.com/lockgen/lockgen/examples/orders/shoplocks"
	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

const (
	locksSpec  = "../../examples/orders/shoplocks/lockgen.yaml"
	queuesSpec = "../../examples/orderclose/shopqueues/lockgen.yaml"
)

// TestInspectCommand runs lockgen inspect against a real Redis where the
// example's generated code holds a lock, and force-unlocks it: refused
// without confirmation, done with it.
func TestInspectCommand(t *testing.T) {
	node := redistest.Single(t)
	rt := runtime.New(node.Client(), runtime.WithID("svc"))
	defer rt.Close()
	ctx := context.Background()
	locks := shoplocks.NewLocks(rt)
	lease, err := locks.Report("acme", "2026-11-23").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	url := "redis://" + node.Addr

	code, out, errs := lockgen(t, "inspect", "-spec", locksSpec, "-redis", url)
	if code != 0 || !strings.Contains(out, "Report") || !strings.Contains(out, "1 held") {
		t.Fatalf("summary: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = lockgen(t, "inspect", "-spec", locksSpec, "-redis", url, "-json", "Report")
	var l inspect.Listing
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil {
		t.Fatalf("listing: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	if len(l.Instances) != 1 || l.Instances[0].Params[0].Value != "acme" || l.Instances[0].Params[1].Value != "2026-11-23" ||
		l.Instances[0].Lock.Holders[0].Client != "svc" {
		t.Fatalf("listing: %s", out)
	}
	code, out, _ = lockgen(t, "inspect", "-spec", locksSpec, "-redis", url, "Report", "acme", "2026-11-23")
	if code != 0 || !strings.Contains(out, "held by svc:1") || !strings.Contains(out, "HOLDER") {
		t.Fatalf("instance: exit %d\n%s", code, out)
	}

	stdin = strings.NewReader("n\n")
	code, _, errs = lockgen(t, "inspect", "-spec", locksSpec, "-redis", url, "-force-unlock", "Report", "acme", "2026-11-23")
	if code != exitFail || !strings.Contains(errs, "force-unlock shop:{Report:report:acme:2026-11-23}? [y/N]") {
		t.Fatalf("unconfirmed force-unlock: exit %d\n%s", code, errs)
	}
	if held, _ := locks.Report("acme", "2026-11-23").IsLocked(ctx); !held {
		t.Fatal("the lock was released without confirmation")
	}
	code, out, errs = lockgen(t, "inspect", "-spec", locksSpec, "-redis", url, "-yes", "-force-unlock", "Report", "acme", "2026-11-23")
	if code != 0 || !strings.Contains(out, "was held: true") {
		t.Fatalf("force-unlock -yes: exit %d\n%s\n%s", code, out, errs)
	}
	<-lease.Context().Done() // the watchdog (lease 1s) finds it gone
	if cause := context.Cause(lease.Context()); !errors.Is(cause, runtime.ErrLockLost) {
		t.Errorf("the holder's lease ended with %v, want ErrLockLost", cause)
	}

	for _, bad := range [][]string{{"Nope"}, {"Order", "x"}, {"-purge", "Order", "1"}} {
		code, _, errs = lockgen(t, append([]string{"inspect", "-spec", locksSpec, "-redis", url, "-yes"}, bad...)...)
		if code != exitUsage {
			t.Errorf("inspect %v: exit %d, want 2\n%s", bad, code, errs)
		}
	}
}

// TestInspectQueueActions redrives and purges the example's queue.
func TestInspectQueueActions(t *testing.T) {
	node := redistest.Single(t)
	rt := runtime.New(node.Client())
	defer rt.Close()
	ctx := context.Background()
	q := shopqueues.NewQueues(rt).OrderClose()
	if _, err := q.Offer(ctx, orders.CloseRequest{OrderID: 1}); err != nil {
		t.Fatal(err)
	}
	for range 5 { // maxDeliveries 5: the fifth Nack dead-letters it
		d, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Nack(ctx, errors.New("payment service down")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if _, err := q.Offer(ctx, orders.CloseRequest{OrderID: int64(i + 2)}); err != nil {
			t.Fatal(err)
		}
	}
	url := "redis://" + node.Addr
	code, out, errs := lockgen(t, "inspect", "-spec", queuesSpec, "-redis", url, "OrderClose")
	if code != 0 || !strings.Contains(out, "2 ready, 0 delayed, 0 in flight, 1 dead") {
		t.Fatalf("listing: exit %d\n%s\n%s", code, out, errs)
	}
	stdin = strings.NewReader("y\n")
	code, out, errs = lockgen(t, "inspect", "-spec", queuesSpec, "-redis", url, "-redrive", "0", "OrderClose")
	if code != 0 || !strings.Contains(out, "payment service down") || !strings.Contains(out, "redrove 1 dead letters") {
		t.Fatalf("redrive: exit %d\n%s\n%s", code, out, errs)
	}
	if st, _ := q.Stats(ctx); st.Ready != 3 || st.Dead != 0 {
		t.Fatalf("after redrive: %+v", st)
	}
	code, out, errs = lockgen(t, "inspect", "-spec", queuesSpec, "-redis", url, "-yes", "-purge", "OrderClose")
	if code != 0 {
		t.Fatalf("purge: exit %d\n%s\n%s", code, out, errs)
	}
	if st, _ := q.Stats(ctx); st != (runtime.QueueStats{}) {
		t.Fatalf("after purge: %+v", st)
	}

	// -pause and -resume: the listing says PAUSED; a Take takes nothing
	// until -resume; -bury moves one item to the dead letters.
	code, out, errs = lockgen(t, "inspect", "-spec", queuesSpec, "-redis", url, "-pause", "OrderClose")
	if code != 0 || !strings.Contains(out, "paused the consumers of") {
		t.Fatalf("pause: exit %d\n%s\n%s", code, out, errs)
	}
	id, err := q.Offer(ctx, orders.CloseRequest{OrderID: 9})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = lockgen(t, "inspect", "-spec", queuesSpec, "-redis", url, "OrderClose")
	if code != 0 || !strings.Contains(out, "PAUSED") {
		t.Fatalf("listing a paused queue: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := q.TryTake(ctx, 0); !errors.Is(err, runtime.ErrEmpty) {
		t.Fatalf("TryTake of a paused queue: %v", err)
	}
	code, out, errs = lockgen(t, "inspect", "-spec", queuesSpec, "-redis", url, "-yes", "-bury", id, "-reason", "bad order", "OrderClose")
	if code != 0 || !strings.Contains(out, "moved item "+id) {
		t.Fatalf("bury: exit %d\n%s\n%s", code, out, errs)
	}
	if dead, err := q.DeadLetters(ctx, 1); err != nil || len(dead) != 1 || dead[0].Reason != "bad order" {
		t.Fatalf("dead letters %+v, %v", dead, err)
	}
	code, out, errs = lockgen(t, "inspect", "-spec", queuesSpec, "-redis", url, "-resume", "OrderClose")
	if code != 0 || !strings.Contains(out, "resumed the consumers of") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errs)
	}
	if paused, _, err := q.Paused(ctx); err != nil || paused {
		t.Fatalf("after -resume: paused %v, %v", paused, err)
	}
}

// TestInspectItemActions shows the example queue's items with their ids,
// and removes, redrives and runs one by id: asked first, exactly that
// item changes, and a second run says it is gone and changes nothing.
func TestInspectItemActions(t *testing.T) {
	node := redistest.Single(t)
	rdb := node.Client()
	rt := runtime.New(rdb)
	defer rt.Close()
	ctx := context.Background()
	q := shopqueues.NewQueues(rt).OrderClose()
	enqueue := func(id int64, opts ...runtime.OfferOption) string {
		t.Helper()
		s, err := q.Enqueue(ctx, orders.CloseRequest{OrderID: id}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	take := func() *runtime.Delivery[orders.CloseRequest] {
		t.Helper()
		d, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	second := enqueue(2)
	if err := take().Bury(ctx, errors.New("order 2 is gone")); err != nil {
		t.Fatal(err)
	}
	inFlight := enqueue(4)
	if d := take(); d.ID() != inFlight {
		t.Fatalf("took %s, want %s", d.ID(), inFlight)
	}
	first, later := enqueue(1), enqueue(3, runtime.After(time.Hour))
	url := "redis://" + node.Addr
	inspectq := func(args ...string) (int, string, string) {
		return lockgen(t, append([]string{"inspect", "-spec", queuesSpec, "-redis", url}, args...)...)
	}
	code, out, errs := inspectq("OrderClose")
	for _, s := range []string{"READY", first, "DELAYED", later, "IN FLIGHT", inFlight, "DEAD LETTER", second, "order 2 is gone"} {
		if code != 0 || !strings.Contains(out, s) {
			t.Fatalf("instance: exit %d, no %s\n%s\n%s", code, s, out, errs)
		}
	}
	t.Logf("lockgen inspect OrderClose:\n%s", out)
	code, out, errs = inspectq("-json", "OrderClose")
	var l inspect.Listing
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || len(l.Instances) != 1 {
		t.Fatalf("listing: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	qs := l.Instances[0].Queue
	if len(qs.ReadyItems) != 1 || qs.ReadyItems[0].ID != first || len(qs.DelayedItems) != 1 || qs.DelayedItems[0].ID != later ||
		len(qs.Deliveries) != 1 || qs.Deliveries[0].ID != inFlight || len(qs.DeadLetters) != 1 || qs.DeadLetters[0].ID != second {
		t.Fatalf("items: %s", out)
	}

	// -item shows one; an unknown id is a clear failure.
	code, out, errs = inspectq("-item", second, "OrderClose")
	if code != 0 || !strings.Contains(out, "item "+second+" of shop:{OrderClose:order-close}: dead") || !strings.Contains(out, "order 2 is gone") {
		t.Fatalf("-item: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = inspectq("-item", "nope.1", "OrderClose")
	if code != exitFail || !strings.Contains(errs, "no item nope.1 in shop:{OrderClose:order-close}") {
		t.Fatalf("-item unknown: exit %d\n%s", code, errs)
	}

	// Remove: asked first; not confirmed, nothing changes.
	stdin = strings.NewReader("n\n")
	code, _, errs = inspectq("-remove", first, "OrderClose")
	if code != exitFail || !strings.Contains(errs, "remove item "+first+" of shop:{OrderClose:order-close}? [y/N]") {
		t.Fatalf("unconfirmed remove: exit %d\n%s", code, errs)
	}
	if st, _ := q.Stats(ctx); st.Ready != 1 {
		t.Fatalf("unconfirmed remove changed the queue: %+v", st)
	}
	stdin = strings.NewReader("y\n")
	code, out, errs = inspectq("-remove", first, "OrderClose")
	if code != 0 || !strings.Contains(out, "removed item "+first) {
		t.Fatalf("remove: exit %d\n%s\n%s", code, out, errs)
	}
	if n := rdb.LLen(ctx, "shop:{OrderClose:order-close}").Val(); n != 0 || rdb.HExists(ctx, "shop:{OrderClose:order-close}:data", first).Val() {
		t.Fatalf("after remove: %d ready, or the body is left", n)
	}
	// Twice: exit 0, gone, nothing changed; -json says so too.
	code, out, errs = inspectq("-yes", "-json", "-remove", first, "OrderClose")
	var r inspect.ItemResult
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.Was != "" || r.Done || r.ID != first {
		t.Fatalf("remove again: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	// In flight: refused, exit 1, the delivery untouched.
	code, _, errs = inspectq("-yes", "-remove", inFlight, "OrderClose")
	if code != exitFail || !strings.Contains(errs, "in flight: not removed") {
		t.Fatalf("remove in flight: exit %d\n%s", code, errs)
	}
	if st, _ := q.Stats(ctx); st.InFlight != 1 {
		t.Fatalf("the delivery in flight was touched: %+v", st)
	}

	// Redrive by id, and run the delayed one now.
	code, out, errs = inspectq("-yes", "-redrive-id", second, "OrderClose")
	if code != 0 || !strings.Contains(out, "redrove item "+second) {
		t.Fatalf("redrive-id: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = inspectq("-yes", "-redrive-id", second, "OrderClose")
	if code != 0 || !strings.Contains(out, "is ready already; nothing changed") {
		t.Fatalf("redrive-id again: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = inspectq("-yes", "-run-now", later, "OrderClose")
	if code != 0 || !strings.Contains(out, "is ready now") {
		t.Fatalf("run-now: exit %d\n%s\n%s", code, out, errs)
	}
	if got := rdb.LRange(ctx, "shop:{OrderClose:order-close}", 0, -1).Val(); strings.Join(got, " ") != second+" "+later {
		t.Fatalf("ready list %v, want %s %s", got, second, later)
	}
	for _, bad := range [][]string{{"-remove", "x"}, {"-remove", "x", "-run-now", "y", "OrderClose"}} {
		if code, _, errs := inspectq(bad...); code != exitUsage {
			t.Errorf("inspect %v: exit %d, want 2\n%s", bad, code, errs)
		}
	}
	code, _, errs = lockgen(t, "inspect", "-spec", locksSpec, "-redis", url, "-yes", "-remove", "x", "Order", "1")
	if code != exitUsage || !strings.Contains(errs, "not a queue") {
		t.Errorf("remove on a lock: exit %d\n%s", code, errs)
	}
}

// TestServeCommand runs lockgen serve on a free loopback port and reads
// its API and metrics, then stops it as an interrupt would.
func TestServeCommand(t *testing.T) {
	node := redistest.Single(t)
	rt := runtime.New(node.Client(), runtime.WithID("svc"))
	defer rt.Close()
	if _, err := shoplocks.NewLocks(rt).Order(7).Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveContext = func() context.Context { return ctx }
	addrs := make(chan string, 1)
	serveReady = func(addr string) { addrs <- addr }
	defer func() { serveContext, serveReady = context.Background, nil }()
	done := make(chan int, 1)
	go func() {
		code, _, errs := lockgen(t, "serve", "-spec", locksSpec, "-redis", "redis://"+node.Addr, "-addr", "127.0.0.1:0", "-read-only")
		if errs != "" {
			t.Errorf("serve: %s", errs)
		}
		done <- code
	}()
	addr := <-addrs
	r, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(body), `lockgen_locks_held{object="Order",kind="reentrant"} 1`) {
		t.Errorf("/metrics:\n%s", body)
	}
	r, err = http.Post("http://"+addr+"/api/action", "application/json", strings.NewReader(`{"action":"force-unlock","object":"Order","params":["7"]}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("an action on serve -read-only: %s", r.Status)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d", code)
	}
}

// TestInspectFlagAfterObject: a flag after the object is named as such,
// with the command in the right order, before Redis is dialled.
func TestInspectFlagAfterObject(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"Order", "42", "-force-unlock"}, "lockgen inspect: -force-unlock comes after the object: flags go before the object (lockgen inspect [flags] -force-unlock Order 42)\n"},
		{[]string{"-yes", "Jobs", "acme", "-redrive", "2"}, "lockgen inspect: -redrive comes after the object: flags go before the object (lockgen inspect [flags] -redrive 2 Jobs acme)\n"},
		{[]string{"Order", "--json"}, "lockgen inspect: --json comes after the object: flags go before the object (lockgen inspect [flags] --json Order)\n"},
	} {
		code, stdout, stderr := lockgen(t, append([]string{"inspect", "-spec", locksSpec, "-redis", "redis://127.0.0.1:1"}, c.args...)...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, c.want) {
			t.Errorf("inspect %v: exit %d\nstderr: %s\nwant:   %s", c.args, code, stderr, c.want)
		}
	}
}

// TestInspectErrorsReadWell: errors from the inspect package are printed
// once prefixed, and a Redis that cannot be reached is named by what was
// being read, not by an internal SCAN pattern.
func TestInspectErrorsReadWell(t *testing.T) {
	node := redistest.Single(t)
	url := "redis://" + node.Addr
	if err := node.Stop(); err != nil { // a Redis that went away
		t.Fatal(err)
	}
	code, _, stderr := lockgen(t, "inspect", "-spec", locksSpec, "-redis", url, "-timeout", "5s")
	if code != exitFail || !strings.HasPrefix(stderr, "lockgen inspect: listing the keys of namespace shop in Redis: ") ||
		strings.Contains(stderr, "inspect: inspect:") || strings.Contains(stderr, "{*") {
		t.Errorf("Redis down: exit %d\n%s", code, stderr)
	}
	code, _, stderr = lockgen(t, "inspect", "-spec", locksSpec, "-redis", url, "-timeout", "5s", "Order")
	if code != exitFail || !strings.HasPrefix(stderr, "lockgen inspect: listing the keys of reentrant Order in Redis: ") {
		t.Errorf("Redis down, one object: exit %d\n%s", code, stderr)
	}
	code, _, stderr = lockgen(t, "inspect", "-spec", locksSpec, "-redis", url, "Nope")
	if code != exitUsage || stderr != "lockgen inspect: no such object in the spec: \"Nope\"\n" {
		t.Errorf("unknown object: exit %d\n%s", code, stderr)
	}
}
