package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/torture/tortureobj"
)

// worker is one worker process: its own go-redis client and runtime
// client, and one loop per object (the mutex, the fenced lock, the
// semaphore, the queue). It writes its events as JSON lines to stdout and
// reads the storage's verdicts on its writes from stdin.
type worker struct {
	id string

	outMu sync.Mutex
	out   *os.File

	reqMu   sync.Mutex
	nextReq int64
	waiting map[int64]chan string
}

// workerMain runs the worker sub-command until SIGTERM or until stdin
// closes (the harness went away).
func workerMain(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	addr := fs.String("addr", "", "Redis address (the worker's proxy)")
	cluster := fs.Bool("cluster", false, "addr is a comma-separated list of cluster nodes")
	id := fs.String("id", "w0.0", "worker id")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rdb redis.UniversalClient
	if *cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(*addr, ",")})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: *addr})
	}
	defer rdb.Close()
	rt := lockrt.New(rdb, lockrt.WithID(*id))
	defer rt.Close()

	w := &worker{id: *id, out: os.Stdout, waiting: map[int64]chan string{}}
	dump := make(chan os.Signal, 1)
	signal.Notify(dump, syscall.SIGUSR1)
	go func() {
		for range dump { // one write, so dumps of several workers do not interleave
			var b bytes.Buffer
			fmt.Fprintf(&b, "=== goroutines of worker %s\n", w.id)
			pprof.Lookup("goroutine").WriteTo(&b, 2)
			os.Stderr.Write(b.Bytes())
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	drain := make(chan struct{}) // closed when the harness drains the queue: offers stop
	go func() {                  // verdicts from the storage, or "drain"; EOF means the harness is gone
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "drain" {
				close(drain)
				continue
			}
			req, res, _ := strings.Cut(sc.Text(), " ")
			n, _ := strconv.ParseInt(req, 10, 64)
			w.reqMu.Lock()
			ch := w.waiting[n]
			delete(w.waiting, n)
			w.reqMu.Unlock()
			if ch != nil {
				ch <- res
			}
		}
		stop()
	}()

	locks := tortureobj.NewLocks(rt)
	sems := tortureobj.NewSemaphores(rt)
	queues := tortureobj.NewQueues(rt)
	latches := tortureobj.NewLatches(rt)
	var wg sync.WaitGroup
	wg.Go(func() { w.lockLoop(ctx, objMutex, locks.Mutex()) })
	wg.Go(func() { w.lockLoop(ctx, objFenced, locks.Fenced()) })
	wg.Go(func() { w.permitLoop(ctx, rdb, sems.Permits()) })
	wg.Go(func() { w.consumeLoop(ctx, queues.Jobs()) })
	wg.Go(func() {
		octx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-drain:
				cancel()
			case <-octx.Done():
			}
		}()
		w.offerLoop(octx, queues.Jobs())
	})
	wg.Go(func() { w.latchLoop(ctx, latches) })
	// The schedule: each tick fires on one worker, which offers the tick.
	tick := tortureobj.NewSchedules(rt).Tick()
	if err := tick.Start(func(_ context.Context, t lockrt.Tick) (string, error) {
		return strconv.FormatInt(t.Time.UnixMilli(), 10), nil
	}); err != nil {
		return err
	}
	wg.Wait()
	tick.Stop()
	return nil
}

// emit writes e as one line: one write(2), so a line is never torn, and a
// worker killed right after still has it in the pipe.
func (w *worker) emit(e Event) {
	e.W = w.id
	b, _ := json.Marshal(e)
	b = append(b, '\n')
	w.outMu.Lock()
	w.out.Write(b)
	w.outMu.Unlock()
}

// write sends a write to the harness's storage and waits for its verdict.
func (w *worker) write(ctx context.Context, e Event) string {
	ch := make(chan string, 1)
	w.reqMu.Lock()
	w.nextReq++
	e.Req = w.nextReq
	w.waiting[e.Req] = ch
	w.reqMu.Unlock()
	e.Ev = evWrite
	w.emit(e)
	select {
	case res := <-ch:
		return res
	case <-ctx.Done():
		return ""
	}
}

// release runs a release (Unlock, Release, Ack) under a context: it outlives a worker told to
// stop (so that it leaves nothing held), with a bound of its own.
func release(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	return f(ctx)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// think pauses between holds, so that waiters are not always all waiting.
func think(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(100+rand.IntN(150)) * time.Millisecond):
	}
}

// lockLoop takes the lock, makes three writes to the storage, each after
// checking that the lease's context is alive, and unlocks; over and over.
func (w *worker) lockLoop(ctx context.Context, obj string, l *lockrt.Lock) {
	for seq := 1; ctx.Err() == nil; seq++ {
		tcall := mono()
		lease, err := l.Lock(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.emit(Event{T: mono(), Ev: evAcqErr, Obj: obj, Err: err.Error()})
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		hold := fmt.Sprintf("%s/%s/%d", w.id, obj, seq)
		tacq := mono()
		w.emit(Event{T: tacq, TCall: tcall, Ev: evAcq, Obj: obj, Hold: hold, Token: lease.Token()})
		if obj == objMutex {
			w.holds(l, lease, hold, "lock", nil)
			w.reenter(ctx, l, lease, hold)
		}
		lost := false
		for i := range 3 {
			if i > 0 {
				time.Sleep(3 * time.Millisecond) // the work between writes
			}
			// The stamp is taken before the check: a pause between the two
			// makes the check later than its stamp, never earlier. The
			// check follows the previous write's verdict at once, so a
			// worker stopped while it waits for the verdict checks its
			// lease first thing when it resumes.
			t := mono()
			if lease.Context().Err() != nil {
				lost = true
				break
			}
			w.write(ctx, Event{T: t, Obj: obj, Hold: hold, Token: lease.Token(), TAcq: tacq})
		}
		t := mono()
		alive := lease.Context().Err() == nil
		if lost || !alive {
			w.emit(Event{T: t, Ev: evLost, Obj: obj, Hold: hold, Err: errString(context.Cause(lease.Context()))})
		}
		w.emit(Event{T: t, Ev: evRel, Obj: obj, Hold: hold, Alive: alive && !lost})
		if obj == objMutex {
			w.holds(l, lease, hold, "prerel", nil)
		}
		err = release(ctx, lease.Unlock)
		w.emit(Event{T: mono(), Ev: evUnlock, Obj: obj, Hold: hold, Err: errString(err)})
		if obj == objMutex {
			w.holds(l, lease, hold, "after", nil)
		}
		think(ctx)
	}
}

// reenter takes the mutex again with the lease's context (a re-entry:
// Redis must count 2 holds), and gives that hold back (1 left).
func (w *worker) reenter(ctx context.Context, l *lockrt.Lock, lease *lockrt.Lease, hold string) {
	inner, err := l.Lock(lease.Context())
	w.holds(l, lease, hold, "reenter", err)
	if err != nil {
		return
	}
	err = release(ctx, inner.Unlock)
	w.holds(l, lease, hold, "inner", err)
}

// holds reads the hold count of lease's owner from Redis (a GET) and
// records it after stage, with stage's error; Alive is the lease's
// Err()==nil checked after the read, so a count read while the lease
// was alive in the client's eyes is marked so.
func (w *worker) holds(l *lockrt.Lock, lease *lockrt.Lease, hold, stage string, stageErr error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(lease.Context()), 3*time.Second)
	defer cancel()
	n, err := l.HoldCount(ctx)
	if err != nil {
		n = -1
	}
	alive := lease.Context().Err() == nil
	w.emit(Event{T: mono(), Ev: evHolds, Obj: objMutex, Hold: hold, Stage: stage, N: n, Alive: alive, Err: errString(stageErr)})
}

// permitLoop takes one permit, checks it twice over a few milliseconds,
// and releases it; over and over.
func (w *worker) permitLoop(ctx context.Context, rdb redis.UniversalClient, s *lockrt.Semaphore) {
	for seq := 1; ctx.Err() == nil; seq++ {
		tcall := mono()
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			if ctx.Err() == nil {
				w.emit(Event{T: mono(), Ev: evAcqErr, Obj: objPermits, Err: err.Error()})
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		hold := fmt.Sprintf("%s/%s/%d", w.id, objPermits, seq)
		w.emit(Event{T: mono(), TCall: tcall, Ev: evAcq, Obj: objPermits, Hold: hold})
		w.permits(ctx, rdb, s, p, hold)
		time.Sleep(time.Duration(20+rand.IntN(30)) * time.Millisecond)
		t := mono()
		alive := p.Context().Err() == nil
		if !alive {
			w.emit(Event{T: t, Ev: evLost, Obj: objPermits, Hold: hold, Err: errString(context.Cause(p.Context()))})
		}
		w.emit(Event{T: t, Ev: evRel, Obj: objPermits, Hold: hold, Alive: alive})
		err = release(ctx, p.Release)
		w.emit(Event{T: mono(), Ev: evUnlock, Obj: objPermits, Hold: hold, Err: errString(err)})
		think(ctx)
	}
}

// permits reads the semaphore's counts from Redis (one HGETALL: the hash
// of owner -> permits, '*' -> permits held in all; see
// templates/sem.luainc) right after Acquire(1): N is what the caller's
// owner holds (1), Extra what '*' counts
// beyond every owner's count (an acquire that ran twice for one owner
// counts its permit twice there).
func (w *worker) permits(ctx context.Context, rdb redis.UniversalClient, s *lockrt.Semaphore, p *lockrt.Permit, hold string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	e := Event{Ev: evHolds, Obj: objPermits, Hold: hold, Stage: "permit", N: -1}
	if m, err := rdb.HGetAll(ctx, s.Key()+":counts").Result(); err == nil {
		e.N = 0
		owners, all, newest := 0, 0, uint64(0)
		for k, v := range m {
			n, _ := strconv.Atoi(v)
			switch {
			case k == "*":
				all = n
			case k == "q" || k == "c":
			default:
				owners += n
				// Owners are "<client id>:<seq>", seq counting up per
				// client: the caller's is this worker's newest (an older
				// one is a hold whose Release failed, left to expire).
				if seq, ok := strings.CutPrefix(k, w.id+":"); ok {
					if s, _ := strconv.ParseUint(seq, 10, 64); s > newest {
						newest, e.N = s, n
					}
				}
			}
		}
		e.Extra = all - owners
	}
	e.Alive = p.Context().Err() == nil
	e.T = mono()
	w.emit(e)
}

// offerLoop offers a message of its own every 100-250ms ("<worker>-o<n>",
// unique per offer), through the worker's proxy.
func (w *worker) offerLoop(ctx context.Context, q *lockrt.ReliableQueue[string]) {
	for seq := 1; ctx.Err() == nil; seq++ {
		msg := fmt.Sprintf("%s-o%d", w.id, seq)
		tcall := mono()
		err := release(ctx, func(ctx context.Context) error { _, err := q.Offer(ctx, msg); return err })
		w.emit(Event{T: mono(), TCall: tcall, Ev: evOffer, Obj: objJobs, Msg: msg, Err: errString(err)})
		think(ctx)
	}
}

// latchLoop counts down latches of 5 of its own ("<worker>-<n>"), five
// times each, reading the count from Redis (a GET) after each CountDown:
// after the c-th it must be 5-c.
func (w *worker) latchLoop(ctx context.Context, latches *tortureobj.Latches) {
	for seq := 1; ctx.Err() == nil; seq++ {
		id := fmt.Sprintf("%s-%d", w.id, seq)
		l := latches.Round(id)
		for c := 1; c <= 5 && ctx.Err() == nil; c++ {
			_, err := l.CountDown(ctx)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
			n, rerr := l.Count(rctx)
			cancel()
			if rerr != nil {
				n = -1
			}
			w.emit(Event{T: mono(), Ev: evCountDown, Obj: objLatch, Hold: id, Att: c, N: n, Err: errString(err)})
			time.Sleep(time.Duration(10+rand.IntN(30)) * time.Millisecond)
		}
		think(ctx)
	}
}

// consumeLoop takes deliveries, works on each for a few milliseconds and
// acknowledges it.
func (w *worker) consumeLoop(ctx context.Context, q *lockrt.ReliableQueue[string]) {
	for ctx.Err() == nil {
		tcall := mono()
		d, err := q.TryTake(ctx, time.Second)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, lockrt.ErrEmpty) {
				w.emit(Event{T: mono(), Ev: evAcqErr, Obj: objJobs, Err: err.Error()})
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		w.emit(Event{T: mono(), TCall: tcall, Ev: evTake, Obj: objJobs, Msg: d.Value, Item: d.ID(), Att: d.Attempt()})
		time.Sleep(time.Duration(5+rand.IntN(15)) * time.Millisecond)
		tcall = mono()
		err = release(ctx, d.Ack)
		w.emit(Event{T: mono(), TCall: tcall, Ev: evAck, Obj: objJobs, Msg: d.Value, Item: d.ID(), Att: d.Attempt(), Err: errString(err)})
	}
}
