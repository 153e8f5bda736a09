package runtime

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

func init() {
	impl.NewSchedule = func(c any, def *impl.ScheduleDef, key string) any {
		return &Schedule{s: c.(*Client).newSchedule(def, key, nil, "")}
	}
	impl.SetUpQueueSchedule = func(s, c any, def *impl.ScheduleDef, q any) {
		s.(queueScheduleSetUp).setUp(c.(*Client), def, q)
	}
}

// Schedule errors.
var (
	// ErrScheduleStarted: Start of a schedule this value started already
	// (and did not stop).
	ErrScheduleStarted = errors.New("lockgen: schedule already started")
	// ErrBadSchedule: the schedule's definition does not parse (a cron
	// expression or time zone this build cannot read): regenerate, or
	// check the time zone database of the host (time/tzdata).
	ErrBadSchedule = errors.New("lockgen: bad schedule")
)

// Tick is one fire of a schedule.
type Tick struct {
	Schedule string    // the schedule's name in the spec
	Time     time.Time // the tick: when it was due, in the schedule's time zone
	// FiredAt is when the tick was claimed, by the Redis server's clock;
	// zero in a queue schedule's build function, which runs before the
	// claim.
	FiredAt time.Time
}

// ScheduleState is a schedule's state in Redis, as State reads it.
type ScheduleState struct {
	Paused bool
	Last   time.Time // the newest tick fired; zero when none
	LastBy string    // the id of the client that fired it
	LastAt time.Time // when it was fired, by the server's clock
	Fires  int64     // how many ticks fired since the state was created
	// Cursor is the newest tick handled: fired, or skipped while paused.
	Cursor time.Time
	Next   time.Time // the next tick after now (the local clock)
}

// schedule is what Schedule and QueueSchedule share: the definition, its
// parsed timetable, its state key and, for a queue target, the queue.
type schedule struct {
	c     *Client
	def   *impl.ScheduleDef
	key   string
	queue []string // the target queue's ready, data and takers keys; nil for a handler
	mode  string   // the target queue's mode
	when  timetable
	err   error // the definition's parse error

	mu  sync.Mutex
	run *schedRun // while started
}

func (c *Client) newSchedule(def *impl.ScheduleDef, key string, queue []string, mode string) *schedule {
	s := &schedule{c: c, def: def, key: key, queue: queue, mode: mode}
	s.when, s.err = parseTimetable(def)
	return s
}

func (s *schedule) ops() rdb.Schedule {
	return rdb.Schedule{Conn: &s.c.conn, Def: s.def, Key: s.key, Queue: s.queue, Mode: s.mode}
}

// timetable says when a schedule's ticks are: every: and @every ticks are
// multiples of the period since the Unix epoch, so every replica computes
// the same ticks whenever it started; cron ticks follow the expression in
// the time zone.
type timetable struct {
	every time.Duration
	cron  cron.Schedule
	loc   *time.Location
}

func parseTimetable(def *impl.ScheduleDef) (timetable, error) {
	t := timetable{every: def.Every, loc: time.UTC}
	if def.Timezone != "" {
		loc, err := time.LoadLocation(def.Timezone)
		if err != nil {
			return t, fmt.Errorf("%w: schedule %s: time zone %q: %v", ErrBadSchedule, def.Name, def.Timezone, err)
		}
		t.loc = loc
	}
	if def.Cron != "" {
		c, err := cron.ParseStandard(def.Cron)
		if err != nil {
			return t, fmt.Errorf("%w: schedule %s: cron %q: %v", ErrBadSchedule, def.Name, def.Cron, err)
		}
		if d, ok := c.(cron.ConstantDelaySchedule); ok {
			t.every = d.Delay
		} else {
			t.cron = c
		}
	}
	if t.cron == nil && t.every < time.Millisecond {
		return t, fmt.Errorf("%w: schedule %s has no period", ErrBadSchedule, def.Name)
	}
	return t, nil
}

// next returns the first tick after ms (unix ms), in unix ms.
func (t timetable) next(ms int64) int64 {
	if t.cron == nil {
		p := t.every.Milliseconds()
		return (ms/p + 1) * p
	}
	return t.cron.Next(time.UnixMilli(ms).In(t.loc)).UnixMilli()
}

// horizon is how far back a schedule looks for missed ticks.
const horizon = 400 * 24 * time.Hour

// pending returns the newest n ticks in (after, upTo], oldest first, and
// the tick after the last of them.
func (t timetable) pending(after, upTo int64, n int) []int64 {
	if low := upTo - horizon.Milliseconds(); after < low {
		after = low
	}
	var out []int64
	if t.cron == nil {
		p := t.every.Milliseconds()
		last := upTo / p * p
		for tk := last; tk > after && len(out) < n; tk -= p {
			out = append(out, tk)
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	for tk := t.next(after); tk <= upTo; tk = t.next(tk) {
		if len(out) == n {
			copy(out, out[1:])
			out = out[:n-1]
		}
		out = append(out, tk)
	}
	return out
}

// offset returns the jitter of tick: the same on every replica.
func (s *schedule) offset(tick int64) int64 {
	j := s.def.Jitter.Milliseconds()
	if j <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(s.def.ID))
	_, _ = h.Write(strconv.AppendInt(nil, tick, 10))
	return int64(h.Sum64() % uint64(j+1))
}

// grace is how late a tick may be claimed under catchUp none: half the
// time to the next tick, at most a minute.
func (s *schedule) grace(tick int64) int64 {
	return min((s.when.next(tick)-tick)/2, time.Minute.Milliseconds())
}

// fireFunc is what a started schedule does per tick: it prepares the
// item to offer (a queue schedule's) before the claim, and runs after a
// claim this client won.
type fireFunc struct {
	prepare func(ctx context.Context, t Tick) ([]byte, error) // nil for a handler
	fired   func(ctx context.Context, t Tick) error           // nil for a queue schedule
}

// start starts s on its client's timer.
func (s *schedule) start(f fireFunc) error {
	if s.err != nil {
		return s.err
	}
	if err := s.c.checkOpen(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run != nil {
		return fmt.Errorf("%w: %s", ErrScheduleStarted, s.def.Name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.run = &schedRun{s: s, f: f, ctx: ctx, cancel: cancel, idx: -1}
	s.c.timers.add(s.c, s.run, time.Now())
	return nil
}

// stop stops s and waits for its fires in progress.
func (s *schedule) stop() {
	s.mu.Lock()
	r := s.run
	s.run = nil
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel() // before remove: a turn ending now does not put it back
	s.c.timers.remove(r)
	r.wg.Wait()
}

// schedCallTimeout bounds each of a schedule's Redis calls.
const schedCallTimeout = 5 * time.Second

// schedRun is a started schedule on its client's timer.
type schedRun struct {
	s      *schedule
	f      fireFunc
	ctx    context.Context // ends when the schedule stops
	cancel context.CancelFunc
	wg     sync.WaitGroup // its turn and fires in progress

	wake time.Time // local clock
	idx  int       // in the timer's heap, or -1

	// Owned by its turn (one at a time):
	known   bool  // cursor and skew are from a reply
	cursor  int64 // the newest tick handled, as the last reply said
	skew    int64 // the server's clock minus the local one, ms
	retries int   // failed turns in a row
	lost    int64 // a tick whose claim had no reply, or 0
}

// turn claims the ticks that are due and returns when to wake next.
func (r *schedRun) turn() time.Time {
	s := r.s
	if !r.known {
		st, err := r.call(r.ctx, func(ctx context.Context) *redis.Cmd { return s.ops().Read(ctx) })
		if err != nil {
			return r.failed(err)
		}
		r.learn(st)
		if r.lost != 0 && st.fired == r.lost && st.by == s.c.id {
			// A claim of ours whose reply was lost fired: the state
			// names this client and that tick (a client claims one
			// tick of a schedule at a time).
			r.fired(r.lost, st.now)
		}
		r.lost = 0
		if st.cursor == 0 {
			// Never fired: it starts with the next tick.
			r.cursor = st.now
		}
	}
	now := time.Now().UnixMilli() + r.skew
	n := 1
	if s.def.CatchUp == impl.CatchUpAll {
		n = max(s.def.MaxCatchUp, 1)
	}
	// after moves past every tick handled here, fired or not (one missed
	// under catchUp none stays below the cursor in Redis).
	after := r.cursor
	for {
		ticks := s.when.pending(max(after, r.cursor), now, n)
		if len(ticks) == 0 {
			break
		}
		for _, tk := range ticks {
			after = tk
			deadline := any("")
			if s.def.CatchUp == impl.CatchUpNone {
				deadline = tk + s.offset(tk) + s.grace(tk)
			}
			st, err := r.claim(tk, deadline)
			if err != nil {
				return r.failed(err)
			}
			now = st.now
			if st.status == -1 { // early by the server's clock
				return time.Now().Add(time.Duration(tk-st.now) * time.Millisecond)
			}
		}
	}
	r.retries = 0
	tk := s.when.next(max(after, r.cursor, now))
	return time.UnixMilli(tk + s.offset(tk) - r.skew)
}

// claim claims tick, and runs the handler when this client fired it.
func (r *schedRun) claim(tick int64, deadline any) (schedReply, error) {
	s := r.s
	t := Tick{Schedule: s.def.Name, Time: time.UnixMilli(tick).In(s.when.loc)}
	var item []byte
	if r.f.prepare != nil {
		var err error
		if item, err = r.f.prepare(r.ctx, t); err != nil {
			s.c.observe(r.ctx, Event{Kind: EventFireFailed, Object: s.def.Name, Key: s.key, Err: err})
			// This replica cannot offer the tick's item; another may.
			return schedReply{status: 0, cursor: tick, now: time.Now().UnixMilli() + r.skew}, nil
		}
	}
	op := s.c.newSharedOp()
	// Not cut short by Stop (which waits for the turn): a claim that fired
	// in Redis runs its handler; one cut short would leave its tick fired
	// and unhandled, as no turn comes after Stop to read it back.
	st, err := r.call(context.WithoutCancel(r.ctx), func(ctx context.Context) *redis.Cmd {
		return s.ops().Fire(ctx, tick, s.when.next(tick), s.c.id, op, deadline, item)
	})
	if err != nil {
		r.lost = tick
		return st, err
	}
	r.learn(st)
	if st.status == 1 {
		r.fired(tick, st.now)
	}
	return st, nil
}

// fired runs what follows a fire this client won.
func (r *schedRun) fired(tick, at int64) {
	s := r.s
	t := Tick{Schedule: s.def.Name, Time: time.UnixMilli(tick).In(s.when.loc), FiredAt: time.UnixMilli(at)}
	s.c.observe(r.ctx, Event{Kind: EventFired, Object: s.def.Name, Key: s.key, Duration: t.FiredAt.Sub(t.Time)})
	if r.f.fired == nil {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.f.fired(r.ctx, t); err != nil {
			s.c.observe(r.ctx, Event{Kind: EventFireFailed, Object: s.def.Name, Key: s.key, Err: err})
		}
	}()
}

func (r *schedRun) learn(st schedReply) {
	r.known = true
	r.cursor = max(r.cursor, st.cursor)
	r.skew = st.now - time.Now().UnixMilli()
}

// failed returns when to try again after a failed call: the state is
// read again first.
func (r *schedRun) failed(err error) time.Time {
	r.known = false
	r.s.c.observe(r.ctx, Event{Kind: EventFireFailed, Object: r.s.def.Name, Key: r.s.key, Err: err})
	d := retryBackoff(r.retries)
	r.retries++
	return time.Now().Add(d)
}

// schedReply is schedule_fire's reply.
type schedReply struct {
	status, cursor, now, fired int64
	by                         string
}

// call runs one of the schedule's scripts under parent within
// schedCallTimeout (also when Redis does not answer) and decodes its
// reply.
func (r *schedRun) call(parent context.Context, send func(ctx context.Context) *redis.Cmd) (schedReply, error) {
	ctx, cancel := context.WithTimeout(parent, schedCallTimeout)
	defer cancel()
	cmd, ok := within(ctx, func() *redis.Cmd { return send(ctx) })
	if !ok {
		return schedReply{}, ctx.Err()
	}
	return decodeSchedReply(cmd)
}

// decodeSchedReply decodes a schedule_fire reply.
func decodeSchedReply(cmd *redis.Cmd) (schedReply, error) {
	// schedule_fire reply: {int, int, int, int, string}
	v, err := cmd.Slice()
	if err != nil {
		return schedReply{}, err
	}
	if len(v) != 5 {
		return schedReply{}, fmt.Errorf("lockgen: schedule_fire replied %v", v)
	}
	var st schedReply
	for i, p := range []*int64{&st.status, &st.cursor, &st.now, &st.fired} {
		n, ok := v[i].(int64)
		if !ok {
			return schedReply{}, fmt.Errorf("lockgen: schedule_fire replied %v", v)
		}
		*p = n
	}
	st.by, _ = v[4].(string)
	return st, nil
}

// schedTimers is a client's timer of its started schedules: one goroutine
// and one time.Timer for any number of schedules (a heap by wake time);
// each due schedule takes its turn in a goroutine of its own while it
// runs.
type schedTimers struct {
	mu      sync.Mutex
	h       runHeap
	kick    chan struct{}
	running bool
}

func (t *schedTimers) add(c *Client, r *schedRun, wake time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-c.hub.Closed():
		r.cancel()
	default:
	}
	if r.ctx.Err() != nil {
		return
	}
	r.wake = wake
	heap.Push(&t.h, r)
	if !t.running {
		t.running = true
		t.kick = make(chan struct{}, 1)
		go t.loop(c)
	}
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *schedTimers) remove(r *schedRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.idx >= 0 {
		heap.Remove(&t.h, r.idx)
	}
}

func (t *schedTimers) loop(c *Client) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		now := time.Now()
		for len(t.h) > 0 && !t.h[0].wake.After(now) {
			r := heap.Pop(&t.h).(*schedRun)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				t.add(c, r, r.turn())
			}()
		}
		wait := time.Hour
		if len(t.h) > 0 {
			wait = t.h[0].wake.Sub(now)
		}
		kick := t.kick
		t.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-c.hub.Closed():
			t.mu.Lock()
			runs := t.h
			t.h = nil
			t.mu.Unlock()
			for _, r := range runs {
				r.idx = -1
				r.cancel()
			}
			return
		case <-kick:
		case <-timer.C:
		}
	}
}

// runHeap orders started schedules by wake time.
type runHeap []*schedRun

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].wake.Before(h[j].wake) }
func (h runHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *runHeap) Push(x any) {
	r := x.(*schedRun)
	r.idx = len(*h)
	*h = append(*h, r)
}
func (h *runHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	r.idx = -1
	*h = old[:len(old)-1]
	return r
}

// Schedule is a schedule whose fires run a handler: a generated
// constructor's result, such as schedules.Nightly(). Every replica starts
// it with the same handler; each tick fires on exactly one of them,
// claimed in Redis for the tick's time by the server's clock, without a
// leader. A handler runs at most once per tick: a replica that dies
// after its claim and before its handler ends loses that tick's work (a
// schedule that targets a reliable queue delivers at least once).
type Schedule struct {
	s *schedule
}

// Name returns the schedule's name in the spec.
func (s *Schedule) Name() string { return s.s.def.Name }

// Key returns the Redis key of the schedule's state.
func (s *Schedule) Key() string { return s.s.key }

// Start starts firing the schedule on this client's timer: fn runs in a
// goroutine of its own for each tick this client claims (handlers of one
// schedule overlap when one runs longer than the period), with a context
// that ends when the schedule stops or the client closes. An error fn
// returns is reported to the client's observers (EventFireFailed); the
// tick stays fired. Start does not contact Redis; the first tick it
// fires is the next one, or missed ones by the schedule's catchUp. It
// returns ErrInvalidArgument for a nil fn, ErrScheduleStarted, ErrClosed,
// or ErrBadSchedule.
func (s *Schedule) Start(fn func(ctx context.Context, t Tick) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil handler for schedule %s", ErrInvalidArgument, s.s.def.Name)
	}
	return s.s.start(fireFunc{fired: fn})
}

// Stop stops firing on this client and waits for its handlers in
// progress, and for a claim of a tick in flight (at most 5 s, also when
// Redis does not answer): a tick it claimed runs its handler. Other
// clients keep firing.
func (s *Schedule) Stop() { s.s.stop() }

// Pause pauses the schedule on every replica: its ticks are skipped until
// Resume (see State). It returns a Redis error, or ctx's.
func (s *Schedule) Pause(ctx context.Context) error { return s.s.pause(ctx, true) }

// Resume undoes Pause. It returns a Redis error, or ctx's.
func (s *Schedule) Resume(ctx context.Context) error { return s.s.pause(ctx, false) }

// State reads the schedule's state: paused, the last fire and who fired
// it, the next tick. One HGETALL.
func (s *Schedule) State(ctx context.Context) (ScheduleState, error) { return s.s.state(ctx) }

// Next returns the schedule's first tick after t.
func (s *Schedule) Next(t time.Time) time.Time { return s.s.nextAfter(t) }

func (s *schedule) nextAfter(t time.Time) time.Time {
	if s.err != nil {
		return time.Time{}
	}
	return time.UnixMilli(s.when.next(t.UnixMilli())).In(s.when.loc)
}

func (s *schedule) pause(ctx context.Context, on bool) error {
	_, err := readValue(ctx, func() (int64, error) {
		if on {
			return s.c.rdb.HSet(ctx, s.key, "paused", "1").Result()
		}
		return s.c.rdb.HDel(ctx, s.key, "paused").Result()
	})
	if err != nil {
		return fmt.Errorf("lockgen: pausing %s: %w", s.key, err)
	}
	return nil
}

func (s *schedule) state(ctx context.Context) (ScheduleState, error) {
	m, err := readValue(ctx, func() (map[string]string, error) { return s.c.rdb.HGetAll(ctx, s.key).Result() })
	if err != nil {
		return ScheduleState{}, fmt.Errorf("lockgen: reading %s: %w", s.key, err)
	}
	st := ScheduleStateOf(m)
	st.Next = s.nextAfter(time.Now())
	if !st.Last.IsZero() {
		st.Last = st.Last.In(s.when.loc)
	}
	return st, nil
}

// ScheduleStateOf decodes a schedule's state hash (as HGETALL returns
// it); Next is left zero.
func ScheduleStateOf(m map[string]string) ScheduleState {
	ms := func(f string) time.Time {
		n, err := strconv.ParseInt(m[f], 10, 64)
		if err != nil || n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n)
	}
	fires, _ := strconv.ParseInt(m["fires"], 10, 64)
	return ScheduleState{Paused: m["paused"] == "1", Last: ms("fired"), LastBy: m["by"], LastAt: ms("at"), Fires: fires, Cursor: ms("cursor")}
}

// QueueSchedule is a schedule whose fires offer an item to a queue of the
// same spec: a generated constructor's result. Each tick's item is built
// by the function given to Start, on every replica that tries the tick,
// and offered by the one whose claim wins, in the same script as the
// claim (so a crash between the claim and the offer cannot lose it; with
// a reliable queue the item is then delivered at least once). Its state
// lives under the queue's hash tag (<queue key>:schedule:<name>).
type QueueSchedule[T any] struct {
	s     *schedule
	codec Codec[T]
}

// queueScheduleSetUp is implemented by *QueueSchedule[T] for every T.
type queueScheduleSetUp interface {
	setUp(c *Client, def *impl.ScheduleDef, q any)
}

func (s *QueueSchedule[T]) setUp(c *Client, def *impl.ScheduleDef, target any) {
	var q *queue
	switch t := target.(type) {
	case *Queue[T]:
		q, s.codec = t.q, t.codec
	case *ReliableQueue[T]:
		q, s.codec = t.q, t.codec
	default:
		panic(fmt.Sprintf("lockgen: schedule %s: target %T is not a queue of its payload", def.Name, target))
	}
	s.s = c.newSchedule(def, keys.Sub(q.key, "schedule:"+def.ID), []string{q.keys[kReady], q.keys[kData], q.keys[kTakers]}, q.mode())
}

// Name returns the schedule's name in the spec.
func (s *QueueSchedule[T]) Name() string { return s.s.def.Name }

// Key returns the Redis key of the schedule's state.
func (s *QueueSchedule[T]) Key() string { return s.s.key }

// Start starts firing the schedule on this client's timer: build makes
// each tick's item (it runs before the claim, on every client that tries
// the tick, so it must not have effects of its own); the claim that wins
// offers it. A build error skips this client's claim of the tick (another
// client may fire it) and is reported to the client's observers
// (EventFireFailed), as is an item larger than WithMaxItemSize. It
// returns ErrInvalidArgument for a nil build, ErrScheduleStarted,
// ErrClosed, or ErrBadSchedule.
func (s *QueueSchedule[T]) Start(build func(ctx context.Context, t Tick) (T, error)) error {
	if build == nil {
		return fmt.Errorf("%w: nil build for schedule %s", ErrInvalidArgument, s.s.def.Name)
	}
	return s.s.start(fireFunc{prepare: func(ctx context.Context, t Tick) ([]byte, error) {
		v, err := build(ctx, t)
		if err != nil {
			return nil, err
		}
		b, err := encodeItem(s.codec, v)
		if err != nil {
			return nil, err
		}
		if int64(len(b)) > s.s.c.maxItem {
			return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrItemTooLarge, len(b), s.s.c.maxItem)
		}
		return b, nil
	}})
}

// Stop stops firing on this client, and waits for a claim of a tick in
// flight (at most 5 s, also when Redis does not answer): a tick it
// claimed has its item offered. Other clients keep firing.
func (s *QueueSchedule[T]) Stop() { s.s.stop() }

// Pause pauses the schedule on every replica (see Schedule.Pause).
func (s *QueueSchedule[T]) Pause(ctx context.Context) error { return s.s.pause(ctx, true) }

// Resume undoes Pause.
func (s *QueueSchedule[T]) Resume(ctx context.Context) error { return s.s.pause(ctx, false) }

// State reads the schedule's state (see Schedule.State).
func (s *QueueSchedule[T]) State(ctx context.Context) (ScheduleState, error) {
	return s.s.state(ctx)
}

// Next returns the schedule's first tick after t.
func (s *QueueSchedule[T]) Next(t time.Time) time.Time { return s.s.nextAfter(t) }
