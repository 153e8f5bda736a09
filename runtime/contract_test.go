package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/templates"
)

// contractHook records every script call a client makes: the script (by
// SHA1 or source), how many KEYS and ARGV it was given, and its reply.
type contractHook struct {
	byDigest map[string]string // SHA1 or source -> script name
	mu       sync.Mutex
	calls    []scriptCall
	taken    int // calls before this one were taken by keysSince
}

type scriptCall struct {
	name        string
	keys, args  int
	reply       any   // the call's reply and error, taken in the hook: the
	err         error // go-redis sets the error again after the hooks return
	description string
}

func newContractHook(t *testing.T) *contractHook {
	h := &contractHook{byDigest: map[string]string{}}
	for _, name := range templates.Names() {
		s := script(t, name)
		h.byDigest[s.SHA1] = name
		h.byDigest[s.Source] = name
	}
	return h
}

func (h *contractHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *contractHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.record(cmd, err)
		return err
	}
}
func (h *contractHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.record(cmd, cmd.Err())
		}
		return err
	}
}

func (h *contractHook) record(cmd redis.Cmder, callErr error) {
	args := cmd.Args()
	if len(args) < 3 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return
	}
	digest, _ := args[1].(string)
	name, ok := h.byDigest[digest]
	if !ok {
		return
	}
	nkeys, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil {
		return
	}
	c := scriptCall{name: name, keys: nkeys, args: len(args) - 3 - nkeys, description: fmt.Sprint(args[3:])}
	if rc, ok := cmd.(*redis.Cmd); ok {
		c.reply, c.err = rc.Val(), rc.Err()
	}
	if c.err == nil {
		c.err = callErr
	}
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
}

// count returns how many calls of the named script were recorded.
func (h *contractHook) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.calls {
		if c.name == name {
			n++
		}
	}
	return n
}

// keysSince returns the KEYS count of each run of the named script
// recorded since the last keysSince, in order: an EVALSHA that Redis
// answered NOSCRIPT did not run (the EVAL sent again after it did).
func (h *contractHook) keysSince(name string) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []int
	for _, c := range h.calls[h.taken:] {
		if c.name == name && (c.err == nil || !strings.HasPrefix(c.err.Error(), "NOSCRIPT")) {
			keys = append(keys, c.keys)
		}
	}
	h.taken = len(h.calls)
	return keys
}

// waitFor waits until the named script was called more than before times.
func (h *contractHook) waitFor(t *testing.T, name string, before int) {
	t.Helper()
	eventually(t, failAfter, func() bool { return h.count(name) > before }, "no call of "+name)
}

// TestScriptContracts runs every script through the runtime, built the
// way generated code builds it (through lockimpl), and holds each call to the script's header (see
// templates/README.md): the number of KEYS and ARGV the runtime passes is
// one the header declares, and the reply Redis returns has the declared
// shape. Every script must be called at least once.
func TestScriptContracts(t *testing.T) {
	t.Parallel()
	h := newContractHook(t)
	newHooked := func() *lockrt.Client {
		rdb := redis.NewClient(&redis.Options{Addr: single.Addr})
		rdb.AddHook(h)
		c := lockrt.New(rdb)
		t.Cleanup(func() {
			c.Close()
			rdb.Close()
		})
		return c
	}
	c, c2 := newHooked(), newHooked()
	ctx := context.Background()
	if err := lockimpl.Preload(ctx, c, script(t, "force_unlock")); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Every lock kind: taken, re-entered (or refused), contended, renewed,
	// released, forced open.
	for _, kind := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Simple, lockrt.Fair, lockrt.ReadWrite, lockrt.Fenced} {
		d := def(t, kind, 2*time.Second, true, 0) // renewed every 667ms
		k := key(t, kind.String())
		l, other := lockimpl.NewLock(c, d, k), lockimpl.NewLock(c2, d, k)
		if kind == lockrt.ReadWrite {
			l, other = lockimpl.NewRWLock(c, d, k).Write(), lockimpl.NewRWLock(c2, d, k).Read()
		}
		renews := h.count(d.Scripts.Renew.Name)
		le, err := l.Lock(ctx)
		must(err)
		if again, err := l.TryLock(le.Context(), 0); err == nil {
			must(again.Unlock(ctx))
		}
		if _, err := other.TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
			t.Fatalf("%s: contended TryLock: %v", kind, err)
		}
		h.waitFor(t, d.Scripts.Renew.Name, renews)
		must(le.Unlock(ctx))
		_, err = l.ForceUnlock(ctx)
		must(err)
	}
	rw := lockimpl.NewRWLock(c, def(t, lockrt.ReadWrite, time.Minute, false, 0), key(t, "upgrade"))
	r, err := rw.Read().Lock(ctx)
	must(err)
	if _, err := rw.Write().TryLock(r.Context(), 0); !errors.Is(err, lockrt.ErrUpgrade) {
		t.Fatalf("upgrade: %v", err)
	}
	must(r.Unlock(ctx))

	// A waiter its client keeps registered (registry_refresh), every
	// 100ms, until the holder lets go.
	wd := def(t, lockrt.Reentrant, time.Minute, false, 0)
	wd.WaiterTTL = 300 * time.Millisecond
	wk := key(t, "refresh")
	held, err := lockimpl.NewLock(c, wd, wk).Lock(ctx)
	must(err)
	refreshes := h.count("registry_refresh")
	got := make(chan error, 1)
	go func() {
		wle, err := lockimpl.NewLock(c2, wd, wk).TryLock(ctx, time.Minute)
		if err == nil {
			err = wle.Unlock(ctx)
		}
		got <- err
	}()
	h.waitFor(t, "registry_refresh", refreshes)
	must(held.Unlock(ctx))
	must(<-got)

	// A multi-lock on one slot.
	md := def(t, lockrt.Reentrant, time.Minute, false, 0)
	ml := lockrt.NewMultiLock(lockimpl.NewLock(c, md, "contract:{multi}:a"), lockimpl.NewLock(c, md, "contract:{multi}:b"))
	mle, err := ml.Lock(ctx)
	must(err)
	if _, err := lockrt.NewMultiLock(lockimpl.NewLock(c2, md, "contract:{multi}:a"), lockimpl.NewLock(c2, md, "contract:{multi}:b")).TryLock(ctx, 0); !errors.Is(err, lockrt.ErrNotObtained) {
		t.Fatalf("contended multi-lock: %v", err)
	}
	must(mle.Unlock(ctx))

	// A RedLock of one node.
	red := lockimpl.NewRedLock(lockrt.NewQuorum(c), redDef(t, time.Minute, false, 0), key(t, "red"))
	rle, err := red.Lock(ctx)
	must(err)
	must(rle.Unlock(ctx))
	_, err = red.ForceUnlock(ctx)
	must(err)

	// A semaphore: taken, refused, renewed, resized, read, given back.
	sd := semDef(t, 2, 2*time.Second, true, 0)
	sem := lockimpl.NewSemaphore(c, sd, key(t, "sem"))
	renews := h.count(sd.Scripts.Renew.Name)
	p, err := sem.Acquire(ctx, 1)
	must(err)
	if _, err := sem.TryAcquire(ctx, 2, 0); !errors.Is(err, lockrt.ErrNoPermit) {
		t.Fatalf("semaphore: %v", err)
	}
	if _, err := sem.TryAcquire(ctx, 3, 0); !errors.Is(err, lockrt.ErrTooManyPermits) {
		t.Fatalf("semaphore: %v", err)
	}
	h.waitFor(t, sd.Scripts.Renew.Name, renews)
	_, err = sem.AddPermits(ctx, 1)
	must(err)
	if _, err := sem.AddPermits(ctx, -100); err == nil {
		t.Fatal("semaphore: capacity below 1 accepted")
	}
	must(sem.ResetPermits(ctx))
	_, err = sem.Available(ctx)
	must(err)
	_, err = p.TTL(ctx)
	must(err)
	must(p.SetLease(ctx, time.Minute))
	must(p.Release(ctx))
	each, err := sem.AcquireEach(ctx, 2)
	must(err)
	for _, p := range each {
		must(p.Release(ctx))
	}

	// A latch.
	latch := lockimpl.NewLatch(c, latchDef(t, 2, time.Minute), key(t, "latch"))
	_, err = latch.CountDown(ctx)
	must(err)

	// Every limiter algorithm, with a config that is not the stored one.
	for _, a := range limiterAlgorithms {
		k := key(t, "limit", a.String())
		l := lockimpl.NewLimiter(c, limiterDef(t, a, 10, time.Second, 1, lockrt.ScopeOverall), k)
		_, err := l.Allow(ctx)
		must(err)
		_, _ = lockimpl.NewLimiter(c, limiterDef(t, a, 20, time.Second, 1, lockrt.ScopeOverall), k).Allow(ctx)
		_, err = l.Reconfigure(ctx)
		must(err)
		_, _, err = l.Config(ctx)
		must(err)
		if _, err := lockimpl.NewLimiter(c, limiterDef(t, a, 10, time.Second, 1, lockrt.ScopeOverall), key(t, "limit", "none", a.String())).Reconfigure(ctx, lockrt.IfExists()); !errors.Is(err, lockrt.ErrNoConfig) {
			t.Fatalf("Reconfigure(IfExists) of a limiter without config: %v", err)
		}
	}

	// A delayed reliable queue: offered, delayed, taken, extended, given
	// back, acknowledged, dead-lettered, listed, redriven; and a plain
	// queue whose consumer cannot decode an item.
	qd := queueDef(t, true, time.Minute, 5)
	q := lockimpl.NewDelayedReliableQueue(c, qd, lockrt.String{}, key(t, "queue"))
	_, err = q.Offer(ctx, "a")
	must(err)
	_, err = q.OfferIn(ctx, "b", 10*time.Millisecond)
	must(err)
	_, err = q.PeekDelayed(ctx, 1)
	must(err)
	_, err = q.ContainsDelayed(ctx, "b")
	must(err)
	for range 2 {
		d, err := q.Take(ctx)
		must(err)
		must(d.Extend(ctx, time.Minute))
		must(d.Nack(ctx, errors.New("again")))
		d, err = q.Take(ctx)
		must(err)
		must(d.Ack(ctx))
	}
	_, err = q.Offer(ctx, "c")
	must(err)
	d, err := q.Take(ctx)
	must(err)
	must(d.Bury(ctx, errors.New("bad")))
	_, err = q.DeadLetters(ctx, 10)
	must(err)
	_, err = q.Redrive(ctx, 10)
	must(err)
	_, err = q.OfferMany(ctx, "d", "e", "f")
	must(err)
	_, err = q.PeekN(ctx, 2)
	must(err)
	_, err = q.Remove(ctx, "d")
	must(err)
	ds, err := q.TakeN(ctx, 2)
	must(err)
	for _, d := range ds {
		must(d.Ack(ctx))
	}
	_, err = q.Drain(ctx)
	must(err)
	// Paused, read, resumed (queue_pause); one item run now, buried,
	// redriven (queue_item).
	must(q.Pause(ctx))
	_, _, err = q.Paused(ctx)
	must(err)
	must(q.Resume(ctx))
	id, err := q.Enqueue(ctx, "g", lockrt.After(time.Hour))
	must(err)
	_, err = q.RunNow(ctx, id)
	must(err)
	_, err = q.BuryID(ctx, id, "by hand")
	must(err)
	_, err = q.RedriveID(ctx, id)
	must(err)
	// A wait that runs out on an empty plain queue registers and leaves
	// (queue_wait).
	if _, err := lockimpl.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, key(t, "wait")).TryTake(ctx, 10*time.Millisecond); !errors.Is(err, lockrt.ErrEmpty) {
		t.Fatalf("TryTake of an empty queue: %v, want ErrEmpty", err)
	}
	pk := key(t, "plain")
	must(lockimpl.NewQueue(c, queueDef(t, false, 0, 0), lockrt.String{}, pk).Offer(ctx, "not json"))
	if _, err := lockimpl.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, pk).TryTake(ctx, 0); err == nil {
		t.Fatal("an item that does not decode was taken")
	}

	// A schedule with a handler and one with a reliable queue target:
	// read, claimed, fired.
	hs := lockimpl.NewSchedule(c, scheduleDef("Contract", 50*time.Millisecond), key(t, "schedule"))
	qs := lockimpl.NewReliableQueueSchedule(c, scheduleDef("ContractQueue", 50*time.Millisecond),
		lockimpl.NewReliableQueue(c, qd, lockrt.String{}, key(t, "schedule-queue")))
	must(hs.Start(func(context.Context, lockrt.Tick) error { return nil }))
	must(qs.Start(func(context.Context, lockrt.Tick) (string, error) { return "tick", nil }))
	eventually(t, failAfter, func() bool {
		a, err1 := hs.State(ctx)
		b, err2 := qs.State(ctx)
		return err1 == nil && err2 == nil && a.Fires > 0 && b.Fires > 0
	}, "both schedules fired")
	hs.Stop()
	qs.Stop()

	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for _, call := range h.calls {
		seen[call.name] = true
		contract, err := templates.ContractOf(call.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := contract.CheckCall(call.keys, call.args); err != nil {
			t.Errorf("%v (KEYS and ARGV %s)", err, call.description)
		}
		reply, err := call.reply, call.err
		switch {
		case errors.Is(err, redis.Nil):
			reply = nil
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			continue // the EVAL that followed is recorded too
		case errors.Is(err, context.Canceled):
			continue // a schedule's fire cut short by its Stop: no reply to check
		case err != nil:
			t.Errorf("%s: %v", call.name, err)
			continue
		}
		if err := contract.Reply.Match(reply); err != nil {
			t.Errorf("%s: %v", call.name, err)
		}
	}
	for _, name := range templates.Names() {
		if !seen[name] {
			t.Errorf("script %s was not called", name)
		}
	}
}

// TestDecodersCiteHeaders: every decoder of a script's reply in this
// package sits next to a line "<script> reply: <shape>" (a comment), and
// that shape is the one the script's header states; every script's reply
// is cited somewhere. So a header's reply that changes fails here until
// its decoder is looked at.
func TestDecodersCiteHeaders(t *testing.T) {
	cite := regexp.MustCompile(`//\s+([a-z][a-z_]*) reply: (.*)$`)
	// The runtime's files and its internal packages' (the watchdog
	// decodes the renewals).
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			m := cite.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			name, shape := m[1], m[2]
			if j := strings.Index(shape, " ("); j >= 0 { // a note: "int (not read)"
				shape = shape[:j]
			}
			c, err := templates.ContractOf(name)
			if err != nil {
				t.Errorf("%s:%d: %v", f, i+1, err)
				continue
			}
			if shape != c.Reply.String() {
				t.Errorf("%s:%d: %s reply: %s, but its header says %s", f, i+1, name, shape, c.Reply)
			}
			cited[name] = true
		}
	}
	for _, name := range templates.Names() {
		if !cited[name] {
			t.Errorf("no decoder cites the reply of %s (a comment %q)", name, name+" reply: ...")
		}
	}
}
