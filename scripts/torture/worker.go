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
	go func() { // verdicts from the storage; EOF means the harness is gone
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
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
	var wg sync.WaitGroup
	wg.Go(func() { w.lockLoop(ctx, objMutex, locks.Mutex()) })
	wg.Go(func() { w.lockLoop(ctx, objFenced, locks.Fenced()) })
	wg.Go(func() { w.permitLoop(ctx, sems.Permits()) })
	wg.Go(func() { w.consumeLoop(ctx, queues.Jobs()) })
	wg.Wait()
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
		err = release(ctx, lease.Unlock)
		w.emit(Event{T: mono(), Ev: evUnlock, Obj: obj, Hold: hold, Err: errString(err)})
		think(ctx)
	}
}

// permitLoop takes one permit, checks it twice over a few milliseconds,
// and releases it; over and over.
func (w *worker) permitLoop(ctx context.Context, s *lockrt.Semaphore) {
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

// consumeLoop takes deliveries, works on each for a few milliseconds and
// acknowledges it.
func (w *worker) consumeLoop(ctx context.Context, q *lockrt.ReliableQueue[string]) {
	for ctx.Err() == nil {
		d, err := q.TryTake(ctx, time.Second)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, lockrt.ErrEmpty) {
				w.emit(Event{T: mono(), Ev: evAcqErr, Obj: objJobs, Err: err.Error()})
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		w.emit(Event{T: mono(), Ev: evTake, Obj: objJobs, Msg: d.Value, Item: d.ID(), Att: d.Attempt()})
		time.Sleep(time.Duration(5+rand.IntN(15)) * time.Millisecond)
		err = release(ctx, d.Ack)
		w.emit(Event{T: mono(), Ev: evAck, Obj: objJobs, Msg: d.Value, Item: d.ID(), Att: d.Attempt(), Err: errString(err)})
	}
}
