package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// scheduleDef is a schedule every period, catching up on all missed
// ticks (at most 1000), as the tests' processes build it.
func scheduleDef(name string, every time.Duration) *lockimpl.ScheduleDef {
	return &lockimpl.ScheduleDef{Name: name, ID: name, Every: every, CatchUp: lockimpl.CatchUpAll, MaxCatchUp: 1000,
		Scripts: lockimpl.Scripts().Schedules()}
}

// schedKey returns a key of the test's own, new in each run (a
// schedule's state outlives a run on the package's shared servers).
func schedKey(t testing.TB, values ...string) string {
	return key(t, append(values, strconv.FormatInt(time.Now().UnixNano(), 36))...)
}

// fireLog records the ticks a handler schedule fired, on any client.
type fireLog struct {
	mu    sync.Mutex
	ticks []int64
	by    map[int64]int // tick -> the client that fired it
}

func (l *fireLog) handler(client int) func(context.Context, lockrt.Tick) error {
	return func(_ context.Context, t lockrt.Tick) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.ticks = append(l.ticks, t.Time.UnixMilli())
		if l.by == nil {
			l.by = map[int64]int{}
		}
		l.by[t.Time.UnixMilli()] = client
		return nil
	}
}

func (l *fireLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ticks)
}

func (l *fireLog) snapshot() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ticks)
}

// checkTicks fails unless ticks (in any order) are distinct and every
// period from the first to the last, and returns how many.
func checkTicks(t *testing.T, ticks []int64, period time.Duration) int {
	t.Helper()
	s := slices.Clone(ticks)
	slices.Sort(s)
	p := period.Milliseconds()
	dups, missed := 0, 0
	for i := 1; i < len(s); i++ {
		switch d := s[i] - s[i-1]; {
		case d == 0:
			dups++
		case d != p:
			missed += int(d/p) - 1
		}
	}
	if dups > 0 || missed > 0 {
		t.Errorf("%d fires: %d duplicates, %d ticks missed (first %d, last %d)", len(s), dups, missed, s[0], s[len(s)-1])
	}
	return len(s)
}

// TestScheduleFiresOnce: four clients start one schedule every 100ms;
// each tick fires on exactly one of them (no tick twice, none missed),
// and the state in Redis counts the fires and names the client of the
// last one.
func TestScheduleFiresOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		d := scheduleDef("Once", 100*time.Millisecond)
		k := schedKey(t)
		var log fireLog
		ids := map[string]bool{}
		var scheds []*lockrt.Schedule
		for i := range 4 {
			c := newClient(t, b)
			ids[c.ID()] = true
			s := lockimpl.NewSchedule(c, d, k)
			if err := s.Start(log.handler(i)); err != nil {
				t.Fatal(err)
			}
			scheds = append(scheds, s)
		}
		if err := scheds[0].Start(log.handler(0)); !errors.Is(err, lockrt.ErrScheduleStarted) {
			t.Errorf("second Start: %v, want ErrScheduleStarted", err)
		}
		eventually(t, failAfter, func() bool { return log.len() >= 15 }, "15 fires")
		for _, s := range scheds {
			s.Stop()
		}
		n := checkTicks(t, log.snapshot(), 100*time.Millisecond)
		st, err := scheds[1].State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// A claim that Stop overtook counts in the state without its
		// handler running (at most once per tick): one per schedule at
		// most (the hog series saw 16 counted after 15 handled).
		if st.Fires < int64(n) || st.Fires > int64(n+len(scheds)) || !ids[st.LastBy] || st.Paused {
			t.Errorf("state %+v after %d fires", st, n)
		}
		if !st.Next.After(st.Last) {
			t.Errorf("next %v not after last %v", st.Next, st.Last)
		}
	})
}

// TestSchedulePauseResume: a paused schedule skips its ticks on every
// client (its cursor moves past them, nothing fires) and fires again
// after Resume, without catching up on the paused ticks.
func TestSchedulePauseResume(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		d := scheduleDef("Pause", 100*time.Millisecond)
		k := schedKey(t)
		var log fireLog
		a := lockimpl.NewSchedule(newClient(t, b), d, k)
		other := lockimpl.NewSchedule(newClient(t, b), d, k)
		for i, s := range []*lockrt.Schedule{a, other} {
			if err := s.Start(log.handler(i)); err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
		}
		eventually(t, failAfter, func() bool { return log.len() >= 2 }, "2 fires")
		if err := a.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		paused, err := a.State(ctx)
		if err != nil || !paused.Paused {
			t.Fatalf("state after Pause: %+v, %v", paused, err)
		}
		// Wait until five ticks were skipped while paused.
		eventually(t, failAfter, func() bool {
			st, err := a.State(ctx)
			return err == nil && st.Cursor.Sub(paused.Cursor) >= 500*time.Millisecond
		}, "five ticks skipped")
		st, _ := a.State(ctx)
		if st.Fires > paused.Fires+1 { // one claim may have been in flight
			t.Fatalf("fired while paused: %d fires, %d at Pause", st.Fires, paused.Fires)
		}
		if err := other.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, failAfter, func() bool {
			st, err := a.State(ctx)
			return err == nil && st.Fires >= paused.Fires+3
		}, "fires after Resume")
		ticks := log.snapshot()
		slices.Sort(ticks)
		for i := 1; i < len(ticks); i++ {
			if ticks[i] == ticks[i-1] {
				t.Fatalf("tick %d fired twice", ticks[i])
			}
		}
		if ticks[len(ticks)-1]-ticks[0] < 500+int64(len(ticks)-1)*100 {
			t.Errorf("the paused ticks were caught up: %v", ticks)
		}
	})
}

// TestScheduleCatchUp: ticks missed while no client ran (the state's
// cursor set ten ticks back) follow the schedule's catchUp: all fires
// them (the newest maxCatchUp, here 4), latest fires only the newest,
// none fires none of them.
func TestScheduleCatchUp(t *testing.T) {
	for _, tc := range []struct {
		policy lockimpl.CatchUp
		max    int
		want   int // missed ticks fired
	}{{lockimpl.CatchUpAll, 4, 4}, {lockimpl.CatchUpLatest, 0, 1}, {lockimpl.CatchUpNone, 0, 0}} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			eachBackend(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				const period = 2 * time.Second
				d := scheduleDef("CatchUp", period)
				d.CatchUp, d.MaxCatchUp = tc.policy, tc.max
				k := schedKey(t)
				c := newClient(t, b)
				// Ten ticks missed: the cursor is ten periods before due, the
				// last tick due, which is 1.1s to 1.7s old when the client
				// starts: past catchUp none's grace (half the period), and
				// far enough from the next tick for the first turn to see
				// these ticks alone.
				now, err := c.Redis().Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				p := period.Milliseconds()
				due := now.UnixMilli() / p * p
				switch off := now.UnixMilli() - due; {
				case off < 1100:
					time.Sleep(time.Duration(1100-off) * time.Millisecond) // to that place in the period: a timer's wait
				case off > 1700:
					time.Sleep(time.Duration(p-off+1100) * time.Millisecond)
					due += p
				}
				cursor := due - 10*p
				if err := c.Redis().HSet(ctx, k, "cursor", cursor, "fired", cursor).Err(); err != nil {
					t.Fatal(err)
				}
				var log fireLog
				s := lockimpl.NewSchedule(c, d, k)
				if err := s.Start(log.handler(0)); err != nil {
					t.Fatal(err)
				}
				defer s.Stop()
				// The first turn fires the missed ticks it fires, then the
				// next tick on time: wait for that one.
				eventually(t, failAfter, func() bool {
					st, err := s.State(ctx)
					return err == nil && st.Last.UnixMilli() > due
				}, "the tick after the missed ones")
				s.Stop()
				var missed []int64
				for _, tk := range log.snapshot() {
					if tk <= due {
						missed = append(missed, tk)
					}
				}
				slices.Sort(missed) // (each tick's handler runs in a goroutine of its own: caught-up ticks' may log in any order)
				var want []int64
				for i := tc.want - 1; i >= 0; i-- {
					want = append(want, due-int64(i)*p)
				}
				if !slices.Equal(missed, want) {
					t.Fatalf("missed ticks fired %v, want %v", missed, want)
				}
			})
		})
	}
}

// TestScheduleQueueTarget: a schedule whose target is a queue offers one
// item per tick, built per tick, with the claim: three clients, each
// tick's item once.
func TestScheduleQueueTarget(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		qd := &lockrt.QueueDef{Name: "Target", Reliable: true, Visibility: time.Minute, MaxDeliveries: 5, Scripts: lockimpl.Scripts().Queues()}
		d := scheduleDef("ToQueue", 100*time.Millisecond)
		k := schedKey(t)
		var q *lockrt.ReliableQueue[string]
		for range 3 {
			c := newClient(t, b)
			q = lockimpl.NewReliableQueue(c, qd, lockrt.String{}, k)
			s := lockimpl.NewReliableQueueSchedule(c, d, q)
			if err := s.Start(func(_ context.Context, t lockrt.Tick) (string, error) {
				return strconv.FormatInt(t.Time.UnixMilli(), 10), nil
			}); err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			if !strings.HasPrefix(s.Key(), k+":schedule:") {
				t.Fatalf("state key %s is not under the queue's %s", s.Key(), k)
			}
		}
		var ticks []int64
		for len(ticks) < 10 {
			tctx, cancel := context.WithTimeout(ctx, failAfter)
			dl, err := q.Take(tctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			n, err := strconv.ParseInt(dl.Value, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			ticks = append(ticks, n)
			if err := dl.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		checkTicks(t, ticks, 100*time.Millisecond)
	})
}

// TestScheduleLostReplies: a client whose claims lose their replies
// (go-redis sends the script again) fires each tick once: its handler
// runs once per tick it claimed, and no tick fires twice or is missed.
func TestScheduleLostReplies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		d := scheduleDef("Lossy", 100*time.Millisecond)
		k := schedKey(t)
		c, l, _ := lossyClient(t, b)
		var log fireLog
		s := lockimpl.NewSchedule(c, d, k)
		l.lose(d.Scripts.Fire.SHA1, 5)
		if err := s.Start(log.handler(0)); err != nil {
			t.Fatal(err)
		}
		other := lockimpl.NewSchedule(newClient(t, b), d, k)
		if err := other.Start(log.handler(1)); err != nil {
			t.Fatal(err)
		}
		eventually(t, failAfter, func() bool { return l.left() == 0 && log.len() >= 15 }, "5 lost replies and 15 fires")
		s.Stop()
		other.Stop()
		n := checkTicks(t, log.snapshot(), 100*time.Millisecond)
		st, err := s.State(context.Background())
		if err != nil || st.Fires != int64(n) {
			t.Errorf("state %+v (%v) after %d handler runs", st, err, n)
		}
	})
}

// TestScheduleStopDuringClaim: Stop called while a claim is in flight
// (Redis paused for writes, CLIENT PAUSE WRITE, so that the claim's Fire
// script, sent after the pause took effect, waits there: a hook tells
// when it was sent) waits for it: the claim fires once Redis is unpaused, and
// its handler runs before Stop returns; Redis' count of fires equals the
// handler's runs. (Stop cut the claim short before: the tick was fired in
// Redis and never handled.)
func TestScheduleStopDuringClaim(t *testing.T) {
	t.Parallel()
	node, b := countedNode(t)
	ctx := context.Background()
	c := newClient(t, b)
	d := scheduleDef("Stopping", 100*time.Millisecond)
	sent := &fireSent{sha: d.Scripts.Fire.SHA1}
	c.Redis().AddHook(sent)
	var log fireLog
	s := lockimpl.NewSchedule(c, d, schedKey(t))
	if err := s.Start(log.handler(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, failAfter, func() bool { return log.len() >= 2 }, "the schedule did not fire")
	admin := node.Client()
	defer admin.Do(context.Background(), "client", "unpause")
	// A claim sent after the pause took effect waits in Redis. (One sent
	// just before may land after it and hold the turn without a send
	// after it: then unpause and try again.)
	paused := false
	for try := 0; !paused; try++ {
		if try == 10 {
			t.Fatal("no claim sent during the pause")
		}
		if err := admin.Do(ctx, "client", "pause", 60000, "write").Err(); err != nil {
			t.Fatal(err)
		}
		since := time.Now().UnixNano()
		paused = redistest.Within(time.Second, func() bool { return sent.last.Load() > since })
		if !paused {
			if err := admin.Do(ctx, "client", "unpause").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	stopped := make(chan struct{})
	go func() {
		s.Stop()
		close(stopped)
	}()
	// (A bounded wait for what must not happen: Stop returning while its
	// claim waits in Redis.)
	select {
	case <-stopped:
		t.Fatal("Stop returned while a claim of its tick was in flight")
	case <-time.After(300 * time.Millisecond):
	}
	if err := admin.Do(ctx, "client", "unpause").Err(); err != nil {
		t.Fatal(err)
	}
	<-stopped
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := log.len(); st.Fires != int64(n) {
		t.Fatalf("%d fires in Redis, %d handler runs", st.Fires, n)
	}
}

// fireSent is a hook that records when a schedule's Fire script (sha)
// was last sent.
type fireSent struct {
	sha  string
	last atomic.Int64 // Unix ns
}

func (h *fireSent) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *fireSent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *fireSent) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && a[0] == "evalsha" && a[1] == h.sha {
			h.last.Store(time.Now().UnixNano())
		}
		return next(ctx, cmd)
	}
}

// TestScheduleTimersPerClient: a client runs one timer goroutine for all
// its schedules: 200 started schedules cost it a few goroutines (the
// timer, and turns in progress), not one each.
func TestScheduleTimersPerClient(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	_, b := ownNode(t)
	c := newClient(t, b)
	before := goruntime.NumGoroutine()
	scripts := countScripts(c)
	var scheds []*lockrt.Schedule
	for i := range 200 {
		s := lockimpl.NewSchedule(c, scheduleDef(fmt.Sprintf("Many%d", i), time.Hour), key(t, strconv.Itoa(i)))
		if err := s.Start(func(context.Context, lockrt.Tick) error { return nil }); err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	// Once every first turn (a read of the state) is done, the timer
	// goroutine is left, and the go-redis pool's.
	eventually(t, failAfter, func() bool { return scripts.n.Load() >= 200 }, "200 first turns")
	eventually(t, failAfter, func() bool { return goruntime.NumGoroutine()-before <= 5 }, "at most 5 more goroutines")
	for _, s := range scheds {
		s.Stop()
	}
}

// TestScheduleQueueLostReplies: claims of a queue schedule whose replies
// are lost (the claim and the offer ran; go-redis sends the script again)
// offer each tick's item once: no tick twice in the queue, none missed.
func TestScheduleQueueLostReplies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		qd := &lockrt.QueueDef{Name: "LossyTarget", Scripts: lockimpl.Scripts().Queues()}
		d := scheduleDef("LossyQueue", 100*time.Millisecond)
		k := schedKey(t)
		c, l, rdb := lossyClient(t, b)
		s := lockimpl.NewQueueSchedule(c, d, lockimpl.NewQueue(c, qd, lockrt.String{}, k))
		l.lose(d.Scripts.Fire.SHA1, 5)
		build := func(_ context.Context, t lockrt.Tick) (string, error) {
			return strconv.FormatInt(t.Time.UnixMilli(), 10), nil
		}
		if err := s.Start(build); err != nil {
			t.Fatal(err)
		}
		oc := newClient(t, b)
		other := lockimpl.NewQueueSchedule(oc, d, lockimpl.NewQueue(oc, qd, lockrt.String{}, k))
		if err := other.Start(build); err != nil {
			t.Fatal(err)
		}
		eventually(t, failAfter, func() bool {
			n, err := rdb.LLen(ctx, k).Result()
			return err == nil && l.left() == 0 && n >= 15
		}, "5 lost replies and 15 items")
		s.Stop()
		other.Stop()
		items, err := rdb.LRange(ctx, k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		var ticks []int64
		for _, it := range items {
			n, err := strconv.ParseInt(it[3:], 10, 64)
			if err != nil {
				t.Fatalf("item %q", it)
			}
			ticks = append(ticks, n)
		}
		checkTicks(t, ticks, 100*time.Millisecond)
	})
}

// TestScheduleFireWithoutState: while a schedule's state has no cursor
// (never fired, or lost with an empty Redis restart), schedule_fire fires
// only a tick that is the newest due, so that a replica that knew an older
// cursor does not fire again the ticks fired before the state was lost;
// and a claim sent twice answers "fired" twice and offers nothing more.
func TestScheduleFireWithoutState(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := newClient(t, b)
		rdb := c.Redis()
		k := schedKey(t)
		fire := script(t, "schedule_fire")
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		ms := now.UnixMilli()
		claim := func(tick, next int64, op string) []any {
			t.Helper()
			v, err := rdb.Eval(ctx, fire.Source, []string{k}, tick, "a", op, next, "").Slice()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if v := claim(ms-2000, ms-1000, "op1"); v[0] != int64(0) {
			t.Fatalf("a stale tick without state: %v, want status 0", v)
		}
		if n, _ := rdb.Exists(ctx, k).Result(); n != 0 {
			t.Fatal("a stale tick created the state")
		}
		for range 2 {
			if v := claim(ms-1000, ms+60000, "op2"); v[0] != int64(1) {
				t.Fatalf("the newest due tick: %v, want status 1", v)
			}
		}
		if v := claim(ms-1000, ms+60000, "op3"); v[0] != int64(0) {
			t.Fatalf("another claim of a fired tick: %v, want status 0", v)
		}
		if n, _ := rdb.HGet(ctx, k, "fires").Int(); n != 1 {
			t.Fatalf("%d fires, want 1", n)
		}
	})
}

// TestScheduleScriptsPerTick: a started schedule sends one script per
// tick, its claim (and one read of the state when it starts, a claim
// more of a tick the server's clock finds early, and the claims of ticks
// passed over before the first fire); nothing polls.
func TestScheduleScriptsPerTick(t *testing.T) {
	t.Parallel()
	_, b := ownNode(t)
	c := newClient(t, b)
	replies := &fireReplies{}
	c.Redis().AddHook(replies)
	s := lockimpl.NewSchedule(c, scheduleDef("PerTick", 100*time.Millisecond), schedKey(t))
	if err := s.Start(func(context.Context, lockrt.Tick) error { return nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, failAfter, func() bool {
		st, err := s.State(context.Background())
		return err == nil && st.Fires >= 20
	}, "20 fires")
	s.Stop()
	st, err := s.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The first turn reads the state; then every claim fires its tick,
	// but:
	//   - one the server's clock finds early, sent again when due (one in
	//     ten at most: the client's estimate of the server's clock comes
	//     from replies, so it lags, and a claim is early only when the
	//     wall clock steps);
	//   - before the first fire, one whose next tick is due already by
	//     the time it runs (a schedule that never fired starts with the
	//     newest tick due: under load its first claims come late);
	//   - a call that failed (there should be none), read back before the
	//     next claim.
	// Nothing else: no claim of a tick handled already, no poll.
	r := replies.counts()
	if r.other != 0 || r.fired != st.Fires || r.early > st.Fires/10 || r.reads > 1+r.failed {
		t.Errorf("%d fires: scripts %+v, want one per fire besides the first read, early claims (one in ten at most), ticks skipped before the first fire and failed calls", st.Fires, r)
	} else {
		t.Logf("%d fires: scripts %+v", st.Fires, r)
	}
}

// fireReplies sorts the schedule_fire replies a client gets by status
// (see templates/schedule_fire.lua): fired (1), early (-1), reads (2),
// skipped (0 before the first fire), failed calls, and any other.
type fireReplies struct {
	mu sync.Mutex
	n  fireCounts
}

// fireCounts are fireReplies' counts.
type fireCounts struct{ fired, early, reads, skipped, failed, other int64 }

func (h *fireReplies) counts() fireCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

func (h *fireReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *fireReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return err
		}
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return err // the source follows at once, and counts
		}
		var status int64 = 99
		if c, ok := cmd.(*redis.Cmd); ok {
			if v, ok := c.Val().([]any); ok && len(v) > 0 {
				status, _ = v[0].(int64)
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case err != nil:
			h.n.failed++
		case status == 1:
			h.n.fired++
		case status == -1:
			h.n.early++
		case status == 2:
			h.n.reads++
		case status == 0 && h.n.fired == 0:
			h.n.skipped++
		default:
			h.n.other++
		}
		return err
	}
}
func (h *fireReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestScheduleRedisDown: State, Pause and Resume return within their
// context's deadline when Redis does not answer, and Stop at once.
func TestScheduleRedisDown(t *testing.T) {
	t.Parallel()
	n, b := ownNode(t)
	c := newClient(t, b)
	s := lockimpl.NewSchedule(c, scheduleDef("Down", time.Second), schedKey(t))
	running := lockimpl.NewSchedule(c, scheduleDef("DownRunning", 100*time.Millisecond), schedKey(t, "running"))
	if err := running.Start(func(context.Context, lockrt.Tick) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	// A started schedule whose claims fail stops at once: its calls end
	// with its context.
	start := time.Now()
	running.Stop()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Stop with Redis down took %v", d)
	}
	for name, call := range map[string]func(context.Context) error{
		"State":  func(ctx context.Context) error { _, err := s.State(ctx); return err },
		"Pause":  s.Pause,
		"Resume": s.Resume,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		err := call(ctx)
		cancel()
		if err == nil || time.Since(start) > time.Second {
			t.Errorf("%s with Redis down: %v after %v", name, err, time.Since(start))
		}
	}
}

// The replica test re-executes the test binary as schedule replicas:
// each builds a client and starts the queue schedule of schedChildDef,
// offering each tick's time to a plain queue, until killed.
const (
	schedChildEnv = "LOCKGEN_SCHEDULE_CHILD" // "single <addr>" or "cluster <addr>,<addr>..."
	schedKeyEnv   = "LOCKGEN_SCHEDULE_KEY"   // the queue's key
	// schedWindowEnv sets the replica tests' window (a Go duration;
	// default 12s); make torture-schedule runs them for 60s.
	schedWindowEnv = "LOCKGEN_SCHEDULE_WINDOW"
)

func schedChildDefs() (*lockrt.QueueDef, *lockimpl.ScheduleDef) {
	return &lockrt.QueueDef{Name: "Ticks", Scripts: lockimpl.Scripts().Queues()}, scheduleDef("EverySecond", time.Second)
}

// quiet drops go-redis' log lines (a replica's failed dials while Redis
// restarts).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func scheduleChild() int {
	redis.SetLogger(quiet{})
	kind, addrs, _ := strings.Cut(os.Getenv(schedChildEnv), " ")
	var rdb redis.UniversalClient
	if kind == "cluster" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), DialTimeout: 200 * time.Millisecond})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: addrs, DialTimeout: 200 * time.Millisecond})
	}
	c := lockrt.New(rdb)
	qd, sd := schedChildDefs()
	q := lockimpl.NewQueue(c, qd, lockrt.String{}, os.Getenv(schedKeyEnv))
	s := lockimpl.NewQueueSchedule(c, sd, q)
	if err := s.Start(func(_ context.Context, t lockrt.Tick) (string, error) {
		return strconv.FormatInt(t.Time.UnixMilli(), 10), nil
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

// replica is a child process of the replica tests.
type replica struct{ cmd *exec.Cmd }

func startReplica(t *testing.T, env ...string) *replica {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	return &replica{cmd}
}

func (r *replica) kill() { _ = r.cmd.Process.Signal(syscall.SIGKILL) }

func schedWindow(t *testing.T) time.Duration {
	w := 12 * time.Second
	if v := os.Getenv(schedWindowEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		w = d
	}
	return w
}

// persisted are redis-server's arguments for a node that keeps its data
// across a kill -9 and restart (an append-only file, synced per write).
var persisted = redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always")

// TestScheduleReplicas: eight replica processes fire a schedule every
// second for the window (12s, LOCKGEN_SCHEDULE_WINDOW), while one replica
// after another is killed with kill -9 and restarted, all of them are
// killed for 3s once (no replica running), and Redis is killed and
// restarted (with its append-only file) once: every tick of the window
// fires exactly once, counted from the queue's items in Redis.
func TestScheduleReplicas(t *testing.T) {
	t.Parallel()
	n := redistest.Single(t, persisted)
	scheduleReplicas(t, "single "+n.Addr, n.Client(), func() *redistest.Node { return n })
}

// TestScheduleReplicasCluster is TestScheduleReplicas on a 3-primary
// cluster; the Redis restart is of the primary that holds the schedule.
func TestScheduleReplicasCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t, 3, persisted)
	rdb := cl.Client()
	scheduleReplicas(t, "cluster "+strings.Join(cl.Addrs, ","), rdb, func() *redistest.Node {
		k := schedQueueKey(t)
		slot, err := rdb.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		i, err := cl.SlotOwner(context.Background(), int(slot))
		if err != nil {
			t.Fatal(err)
		}
		return cl.Nodes[i]
	})
}

func schedQueueKey(t *testing.T) string {
	k := lockrt.KeyDef{Namespace: "test", Object: "Ticks", Literals: []string{""}}
	return k.Key()
}

func scheduleReplicas(t *testing.T, target string, rdb redis.UniversalClient, owner func() *redistest.Node) {
	ctx := context.Background()
	window := schedWindow(t)
	k := schedQueueKey(t)
	env := []string{schedChildEnv + "=" + target, schedKeyEnv + "=" + k}
	reps := make([]*replica, 8)
	for i := range reps {
		reps[i] = startReplica(t, env...)
	}
	defer func() {
		for _, r := range reps {
			r.kill()
		}
	}()
	// The window starts with the first fire (the replicas' start-up, a
	// race-built binary on a busy machine, takes seconds).
	eventually(t, failAfter, func() bool { n, err := rdb.LLen(ctx, k).Result(); return err == nil && n > 0 }, "a first fire")
	start := time.Now()
	var restarts, kills int
	outage, redisDown := false, false
	for time.Since(start) < window {
		// Faults at a fixed cadence (not a barrier: the replicas fire
		// on their own timers whatever happens here).
		time.Sleep(700 * time.Millisecond)
		el := time.Since(start)
		switch {
		case !outage && el > window/4:
			outage = true
			for _, r := range reps {
				r.kill()
			}
			time.Sleep(3 * time.Second) // three ticks with no replica running
			for i := range reps {
				reps[i] = startReplica(t, env...)
			}
			kills += len(reps)
		case !redisDown && el > window/2:
			redisDown = true
			node := owner()
			if err := node.Kill(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // two ticks with Redis down
			if err := node.Restart(); err != nil {
				t.Fatal(err)
			}
			restarts++
		default:
			i := rand.IntN(len(reps))
			reps[i].kill()
			reps[i] = startReplica(t, env...)
			kills++
		}
	}
	end := time.Now()
	// Every tick up to the window's end fired: wait for its item.
	last := end.UnixMilli() / 1000 * 1000
	var ticks []int64
	read := func() bool {
		items, err := rdb.LRange(ctx, k, 0, -1).Result()
		if err != nil {
			return false
		}
		ticks = ticks[:0]
		for _, it := range items {
			if len(it) < 3 {
				t.Fatalf("item %q", it)
			}
			n, err := strconv.ParseInt(it[3:], 10, 64) // after the envelope's header
			if err != nil {
				t.Fatalf("item %q", it)
			}
			ticks = append(ticks, n)
		}
		return true
	}
	eventually(t, failAfter, func() bool { return read() && slices.Contains(ticks, last) }, "the window's last tick")
	for _, r := range reps {
		r.kill()
	}
	// The replicas fired on until they died (a fire the kill overtook
	// lands in one script, its item with its count): the queue and the
	// state are compared once both have settled.
	_, sd := schedChildDefs()
	var fires int64
	if !within(failAfter, func() bool {
		st, err := rdb.HGetAll(ctx, k+":schedule:"+sd.ID).Result()
		if err != nil || !read() {
			return false
		}
		fires = lockrt.ScheduleStateOf(st).Fires
		return fires == int64(len(ticks))
	}) {
		t.Errorf("state counts %d fires, the queue holds %d", fires, len(ticks))
	}
	n := checkTicks(t, ticks, time.Second)
	if first := slices.Min(ticks); first > start.UnixMilli() {
		t.Errorf("first tick %v after the window's start %v", time.UnixMilli(first), start)
	}
	n = 0 // the ticks of the window: (start, last]
	for _, tk := range ticks {
		if tk > start.UnixMilli() {
			n++
		}
	}
	st, err := rdb.HGetAll(ctx, k+":schedule:"+sd.ID).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("window %v: %d ticks fired in it (%d in all, %d in the state), 0 duplicates and 0 missed unless reported; %d replica kills, %d Redis restarts, last fired by %s",
		window, n, len(ticks), fires, kills, restarts, st["by"])
}
