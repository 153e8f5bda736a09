package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// recorder is an Observer that records what it is told.
type recorder struct {
	mu     sync.Mutex
	ops    []string // "Lock Obj start", "Lock Obj end <err>"
	events []lockrt.Event
}

type spanKey struct{}

func (r *recorder) Start(ctx context.Context, op lockrt.Op) (context.Context, func(error)) {
	r.mu.Lock()
	r.ops = append(r.ops, fmt.Sprintf("%s %s start", op.Kind, op.Object))
	r.mu.Unlock()
	return context.WithValue(ctx, spanKey{}, string(op.Kind)), func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ops = append(r.ops, fmt.Sprintf("%s %s end %v", op.Kind, op.Object, err != nil))
	}
}

func (r *recorder) Event(ctx context.Context, e lockrt.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// kinds returns the kinds of the events recorded for object, in order.
func (r *recorder) kinds(object string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Object == object {
			out = append(out, string(e.Kind))
		}
	}
	return out
}

func (r *recorder) find(kind lockrt.EventKind) (lockrt.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == kind {
			return e, true
		}
	}
	return lockrt.Event{}, false
}

// TestObserver drives every observed operation against a real Redis and
// checks what a client's observer and logger hear: acquisitions with
// their wait, releases with their hold time, renewals, a lost lease, a
// script reloaded after SCRIPT FLUSH, limiter decisions, and a queue
// item's life from offer to dead letter.
func TestObserver(t *testing.T) {
	t.Parallel()
	// A node of its own: the test flushes its scripts.
	rdb := redistest.Single(t).Client()
	rec := &recorder{}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	c := lockrt.New(rdb, lockrt.WithObserver(rec), lockrt.WithLogger(logger))
	defer c.Close()
	other := lockrt.New(rdb)
	defer other.Close()
	ctx := context.Background()

	// A lock: taken after a wait, renewed, released; its ops carry the
	// observer's context.
	d := def(t, lockrt.Reentrant, 900*time.Millisecond, true, 5*time.Second)
	d.Name = "Order"
	k := key(t, "order")
	held, err := other.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, func() { held.Unlock(ctx) })
	le, err := c.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if le.Context().Value(spanKey{}) != "Lock" {
		t.Error("the lease's context does not carry the observer's context")
	}
	time.Sleep(700 * time.Millisecond) // two renewals at lease/3
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	acq, _ := rec.find(lockrt.EventAcquired)
	if acq.Object != "Order" || acq.Duration < 100*time.Millisecond {
		t.Errorf("acquired %+v: want Order with a wait of about 200ms", acq)
	}
	rel, _ := rec.find(lockrt.EventReleased)
	if rel.Duration < 600*time.Millisecond {
		t.Errorf("released %+v: want a hold of about 700ms", rel)
	}
	if got := strings.Join(rec.kinds("Order"), " "); !strings.HasPrefix(got, "acquired renewed") || !strings.HasSuffix(got, "renewed released") {
		t.Errorf("Order's events: %s", got)
	}

	// A lost lease: the key is deleted under its holder.
	d2 := def(t, lockrt.Reentrant, 600*time.Millisecond, true, 0)
	d2.Name = "Doomed"
	le2, err := c.Lock(d2, key(t, "doomed")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, key(t, "doomed"))
	<-le2.Context().Done()
	if e, ok := rec.find(lockrt.EventLeaseLost); !ok || e.Object != "Doomed" || !errors.Is(e.Err, lockrt.ErrLockLost) {
		t.Errorf("lease-lost event %+v, %v", e, ok)
	}

	// NOSCRIPT: the script is sent again, and said so.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	le3, err := c.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	le3.Unlock(ctx)
	if e, ok := rec.find(lockrt.EventScriptReloaded); !ok || e.Object != "reentrant_acquire" {
		t.Errorf("script-reloaded event %+v, %v", e, ok)
	}

	// A semaphore's permits.
	sd := semDef(t, 2, time.Minute, true, time.Second)
	sd.Name = "Export"
	p, err := c.Semaphore(sd, key(t, "sem")).Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(ctx)
	if got := strings.Join(rec.kinds("Export"), " "); got != "acquired released" {
		t.Errorf("Export's events: %s", got)
	}

	// A limiter: burst 1 allows two at once, then denies.
	ld := limiterDef(t, lockrt.GCRA, 1, time.Hour, 1, lockrt.ScopeOverall)
	ld.Name = "API"
	lim := c.Limiter(ld, key(t, "lim"))
	for range 3 {
		if _, err := lim.Allow(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(rec.kinds("API"), " "); got != "allowed allowed denied" {
		t.Errorf("API's events: %s", got)
	}

	// A reliable queue: offer, take, ack; offer, take, nack twice: dead.
	qd := queueDef(t, false, time.Minute, 2)
	qd.Name = "Email"
	q := lockrt.NewReliableQueue(c, qd, lockrt.JSON[string]{}, key(t, "q"))
	if err := q.OfferMany(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	del, err := q.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	del.Ack(ctx)
	for range 2 {
		del, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		del.Nack(ctx, errors.New("bounced"))
	}
	if got := strings.Join(rec.kinds("Email"), " "); got != "enqueued delivered acked delivered nacked delivered dead" {
		t.Errorf("Email's events: %s", got)
	}
	if e, _ := rec.find(lockrt.EventEnqueued); e.N != 2 {
		t.Errorf("enqueued %+v, want N 2", e)
	}

	rec.mu.Lock()
	ops := map[string]int{}
	for _, o := range rec.ops {
		ops[o]++
	}
	rec.mu.Unlock()
	for _, want := range []string{"Lock Order start", "Lock Order end false", "Acquire Export end false", "Allow API end false", "Offer Email end false", "Take Email end false"} {
		if ops[want] == 0 {
			var all []string
			for o := range ops {
				all = append(all, o)
			}
			sort.Strings(all)
			t.Errorf("no %q among the ops %q", want, all)
		}
	}

	logMu.Lock()
	text := logs.String()
	logMu.Unlock()
	for _, want := range []string{`level=WARN msg="lockgen: lease lost" object=Doomed`, `level=INFO msg="lockgen: script reloaded after NOSCRIPT" script=reentrant_acquire`} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %q:\n%s", want, text)
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
