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

	"github.com/redis/go-redis/v9"

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

// count returns how many events of kind were recorded.
func (r *recorder) count(kind lockrt.EventKind) int { return len(r.all(kind)) }

// all returns the events of kind recorded.
func (r *recorder) all(kind lockrt.EventKind) []lockrt.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []lockrt.Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
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
	// Long enough that the waiter's fallback timer (the holder's PTTL)
	// does not beat the release's message on a loaded machine.
	d := def(t, lockrt.Reentrant, 3*time.Second, true, 5*time.Second)
	d.Name = "Order"
	k := key(t, "order")
	held, err := other.Lock(d, k).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := inBackground(t, func() (*lockrt.Lease, error) { return c.Lock(d, k).Lock(ctx) })
	waitWaiting(t, c, k, 1, 1)
	waiting := time.Now() // the Lock began before
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waited := time.Since(waiting) // at most the Lock's wait
	le := <-got
	if le == nil {
		t.FailNow()
	}
	holding := time.Now() // the hold began before
	if le.Context().Value(spanKey{}) != "Lock" {
		t.Error("the lease's context does not carry the observer's context")
	}
	eventually(t, failAfter, func() bool { return rec.count(lockrt.EventRenewed) >= 2 }, "Order was not renewed twice")
	held2 := time.Since(holding) // at most the hold
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	acq, _ := rec.find(lockrt.EventAcquired)
	if acq.Object != "Order" || acq.Duration < waited {
		t.Errorf("acquired %+v: want Order with a wait of at least %v", acq, waited)
	}
	rel, _ := rec.find(lockrt.EventReleased)
	if rel.Duration < held2 {
		t.Errorf("released %+v: want a hold of at least %v", rel, held2)
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
	if _, err := q.OfferMany(ctx, "a", "b"); err != nil {
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

// TestObserverLateness: the delay timer reports each delayed item it
// makes ready as EventDue with how late it was (moved minus due, on the
// server's clock): two items left due 5s ago (as by a client that died)
// are reported at least 5s late when a client starts the queue, an item
// offered with a delay and a retried delivery once each; a client
// without observers asks the script for no lateness (the reply stays
// four integers).
func TestObserverLateness(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 30*time.Second)
	rdb := backends()[0].new()
	defer rdb.Close()
	rec := &recorder{}
	c := lockrt.New(rdb, lockrt.WithObserver(rec))
	defer c.Close()

	d := queueDef(t, true, time.Minute, 3)
	d.Name = "Late"
	k := key(t, "late")
	tm, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	past := float64(tm.Add(-5 * time.Second).UnixMilli())
	body := "\x00\x01j\"old\""
	for _, id := range []string{"left-1", "left-2"} {
		if err := rdb.ZAdd(ctx, k+":delayed", redis.Z{Score: past, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.HSet(ctx, k+":data", id, body)
	}
	q := lockrt.NewDelayedReliableQueue(c, d, lockrt.JSON[string]{}, k)
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	dues := func() []lockrt.Event {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var out []lockrt.Event
		for _, e := range rec.events {
			if e.Kind == lockrt.EventDue {
				out = append(out, e)
			}
		}
		return out
	}
	if got := dues(); len(got) != 2 || got[0].Object != "Late" || got[0].Duration < 5*time.Second || got[1].Duration < 5*time.Second {
		t.Fatalf("due events after Start: %+v; want two, for Late, each at least 5s late", got)
	}
	if _, err := q.OfferIn(ctx, "new", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		del, err := q.TryTake(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if del.Value == "new" {
			if err := del.Retry(ctx, errors.New("later"), 20*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			continue
		}
		del.Ack(ctx)
	}
	del, err := q.TryTake(ctx, 10*time.Second)
	if err != nil || del.Value != "new" || del.Attempt() != 2 {
		t.Fatalf("the retried item: %+v, %v", del, err)
	}
	del.Ack(ctx)
	// The timer reports after its move replied, maybe after the Take.
	eventually(t, failAfter, func() bool { return len(dues()) >= 4 }, "fewer than 4 due events")
	got := dues()
	if len(got) != 4 {
		t.Fatalf("%d due events; want 4 (two left, one offered, one retried): %+v", len(got), got)
	}
	for _, e := range got[2:] {
		if e.Object != "Late" || e.Duration < 0 {
			t.Errorf("due event %+v", e)
		}
	}

	// Without observers the script is not asked for the lateness.
	var replies []int
	var mu sync.Mutex
	rdb2 := backends()[0].new()
	defer rdb2.Close()
	rdb2.AddHook(replyLen{&mu, &replies, d.Scripts.Move})
	plain := lockrt.New(rdb2)
	defer plain.Close()
	pq := lockrt.NewDelayedReliableQueue(plain, d, lockrt.JSON[string]{}, key(t, "plain"))
	if _, err := pq.OfferIn(ctx, "x", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := pq.TryTake(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The move ran before the Take got its item; its reply reaches the
	// hook in the timer's goroutine, maybe after the Take returned.
	eventually(t, failAfter, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(replies) > 0
	}, "no move script ran")
	mu.Lock()
	defer mu.Unlock()
	for _, n := range replies {
		if n != 4 {
			t.Errorf("a move replied %d integers without observers; want 4", n)
		}
	}
}

// replyLen records the reply length of every call of the move script.
type replyLen struct {
	mu   *sync.Mutex
	n    *[]int
	move *lockrt.Script
}

func (replyLen) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h replyLen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if len(args) > 3 && (args[0] == "evalsha" || args[0] == "eval") {
			if c, ok := cmd.(*redis.Cmd); ok {
				if s, ok := c.Val().([]any); ok && (args[1] == h.move.SHA1 || args[1] == h.move.Source) {
					h.mu.Lock()
					*h.n = append(*h.n, len(s))
					h.mu.Unlock()
				}
			}
		}
		return err
	}
}
func (replyLen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// logRecord is a log record as recordHandler keeps it.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recordHandler is a slog.Handler that keeps every record, at every
// level.
type recordHandler struct {
	mu      *sync.Mutex
	records *[]logRecord
}

func (recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, rec)
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// find waits (failAfter at most) for a record with the level and
// message, and returns it.
func (h recordHandler) find(t *testing.T, level slog.Level, msg string) (logRecord, bool) {
	t.Helper()
	var found logRecord
	ok := within(failAfter, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, r := range *h.records {
			if r.level == level && r.msg == msg {
				found = r
				return true
			}
		}
		return false
	})
	return found, ok
}

// TestLoggerResubscribeAndTimerRetry: WithLogger logs a pub/sub
// connection killed under a served queue (CLIENT KILL TYPE pubsub) at
// Warn with the number of channels subscribed again, and each channel at
// Debug; the channel is subscribed again. A run of the delay timer that
// fails (its delayed set made a string: WRONGTYPE) is logged at Warn with
// the queue's object and key, and the timer recovers once the key is
// fixed.
func TestLoggerResubscribeAndTimerRetry(t *testing.T) {
	t.Parallel()
	// A node of its own: the test kills its pub/sub connections.
	rdb := redistest.Single(t).Client()
	ctx := withTimeout(t, 60*time.Second)
	var records []logRecord
	h := recordHandler{&sync.Mutex{}, &records}
	c := lockrt.New(rdb, lockrt.WithLogger(slog.New(h)))
	defer c.Close()

	d := queueDef(t, true, time.Minute, 3)
	d.Name = "Mail"
	k := key(t, "mail")
	q := lockrt.NewDelayedReliableQueue(c, d, lockrt.JSON[string]{}, k)
	taken := make(chan string, 1)
	go func() { // a waiting Take keeps the queue served
		del, err := q.TryTake(ctx, 50*time.Second)
		if err != nil {
			taken <- err.Error()
			return
		}
		del.Ack(ctx)
		taken <- del.Value
	}()
	subscribed := func() bool {
		n, err := rdb.PubSubNumSub(ctx, k+":ch").Result()
		return err == nil && n[k+":ch"] == 1
	}
	waitUntil := func(what string, f func() bool) {
		t.Helper()
		eventually(t, failAfter, f, "timed out waiting until "+what)
	}
	waitUntil("the queue's channel is subscribed", subscribed)

	if err := rdb.Do(ctx, "client", "kill", "type", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	// Two channels: the queue's (its delay timer's) and the client's
	// wake-up channel, on which the waiting Take sleeps.
	r, ok := h.find(t, slog.LevelWarn, "lockgen: pub/sub connection lost; subscribing its channels again")
	if !ok || r.attrs["channels"] != "2" || r.attrs["err"] == "" {
		t.Errorf("the lost connection's record: %+v, %v; want channels=2 and the error", r, ok)
	}
	if !within(failAfter, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, r := range *h.records {
			if r.level == slog.LevelDebug && r.msg == "lockgen: subscribing again" && r.attrs["channel"] == k+":ch" {
				return true
			}
		}
		return false
	}) {
		t.Errorf("no record of subscribing %s again", k+":ch")
	}
	waitUntil("the queue's channel is subscribed again", subscribed)

	// A failing move: the delayed set is a string; a message on the
	// channel makes the timer run the move.
	if err := rdb.Set(ctx, k+":delayed", "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Publish(ctx, k+":ch", "0").Err(); err != nil {
		t.Fatal(err)
	}
	r, ok = h.find(t, slog.LevelWarn, "lockgen: delay timer's move failed; retrying")
	if !ok || r.attrs["object"] != "Mail" || r.attrs["key"] != k || !strings.Contains(r.attrs["err"], "WRONGTYPE") || r.attrs["retry"] == "" {
		t.Errorf("the timer retry's record: %+v, %v; want object=Mail key=%s, the WRONGTYPE error and the retry", r, ok, k)
	}
	rdb.Del(ctx, k+":delayed")
	if _, err := q.OfferIn(ctx, "late", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if v := <-taken; v != "late" {
		t.Errorf("the waiting Take got %q; want the delayed item moved by the recovered timer", v)
	}
}

// TestWaitFallbackEvent: a wait that a release ends (the wake-up message)
// reports no EventWaitFallback; one whose holder's lease runs out
// unreleased (a holder that stopped: a lease of 400ms, not renewed, never
// unlocked) ends by the waiter's fallback timer, and reports
// EventWaitFallback with the lock's object, key and wait, also to
// WithLogger at Info. A semaphore's wait does the same. On one node and
// on the 3-primary cluster.
func TestWaitFallbackEvent(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			rdb := b.new()
			defer rdb.Close()
			rec := &recorder{}
			var logs bytes.Buffer
			var logMu sync.Mutex
			logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
			c := lockrt.New(rdb, lockrt.WithObserver(rec), lockrt.WithLogger(logger))
			defer c.Close()
			other := newClient(t, b)
			ctx := withTimeout(t, 30*time.Second)

			// A fixed lease long enough that the waiter's fallback timer
			// (the holder's PTTL) does not beat the release's message on
			// a loaded machine.
			d := def(t, lockrt.Reentrant, 2*time.Second, false, 10*time.Second)
			d.Name = "Order"
			k := key(t, "order")
			held, err := other.Lock(d, k).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := inBackground(t, func() (*lockrt.Lease, error) { return c.Lock(d, k).Lock(ctx) })
			waitWaiting(t, c, k, 1, 1)
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			le := <-got
			if le == nil {
				t.FailNow()
			}
			le.Unlock(ctx)
			if n := rec.count(lockrt.EventWaitFallback); n != 0 {
				t.Fatalf("a wait ended by a release reported %d EventWaitFallback, want 0", n)
			}

			if _, err := other.Lock(d, k).Lock(ctx); err != nil { // never unlocked
				t.Fatal(err)
			}
			start := time.Now()
			le, err = c.Lock(d, k).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			waited := time.Since(start)
			le.Unlock(ctx)
			e, ok := rec.find(lockrt.EventWaitFallback)
			if !ok || e.Object != "Order" || e.Key != k || e.Duration <= 0 || e.Duration > waited {
				t.Errorf("EventWaitFallback %+v, %v: want object Order, key %s and the wait (at most %v)", e, ok, k, waited)
			}
			if n := rec.count(lockrt.EventWaitFallback); n != 1 {
				t.Errorf("%d EventWaitFallback, want 1", n)
			}
			logMu.Lock()
			logged := logs.String()
			logMu.Unlock()
			if !strings.Contains(logged, "level=INFO") || !strings.Contains(logged, "fallback timer") || !strings.Contains(logged, "object=Order") {
				t.Errorf("the fallback wait is not logged at Info with its object:\n%s", logged)
			}

			// A semaphore whose holder's permit runs out unreleased.
			sd := semDef(t, 1, 400*time.Millisecond, false, 10*time.Second)
			sd.Name = "Export"
			sk := key(t, "export")
			if _, err := other.Semaphore(sd, sk).Acquire(ctx, 1); err != nil {
				t.Fatal(err)
			}
			p, err := c.Semaphore(sd, sk).Acquire(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			p.Release(ctx)
			found := false
			for _, e := range rec.all(lockrt.EventWaitFallback) {
				found = found || (e.Object == "Export" && e.Key == sk)
			}
			if !found {
				t.Errorf("no EventWaitFallback for the semaphore Export (%s): %+v", sk, rec.all(lockrt.EventWaitFallback))
			}
		})
	}
}
