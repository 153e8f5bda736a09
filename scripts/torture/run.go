package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
	"github.com/lockgen/lockgen/scripts/torture/tortureobj"
)

// lease is the lease of every object in tortureobj/lockgen.yaml, and the
// queue's visibility timeout.
const lease = 2 * time.Second

// Config is one run of the harness.
type Config struct {
	Workers int           // worker processes
	Faults  []string      // the schedule, in order (see faultKinds)
	Rounds  int           // how many times the schedule runs
	Warmup  time.Duration // before the first fault
	Settle  time.Duration // after each fault heals, before the next begins
	Cluster bool          // a 3-primary cluster instead of one node (no proxy faults)
	Dir     string        // where events.jsonl and workers.log go ("": a temporary directory)
	// LoseRate is the fraction of EVAL/EVALSHA requests whose reply the
	// proxies lose during a lose-replies fault, which lasts LoseFor.
	LoseRate float64
	LoseFor  time.Duration
	// Worker returns the command that starts one worker process with the
	// given arguments (the harness's own binary, sub-command worker).
	Worker func(args ...string) *exec.Cmd
	Log    io.Writer // progress lines (nil: none)
}

// harness is one run: Redis, the proxies, the workers, the producer, the
// storage and the log.
type harness struct {
	cfg     Config
	node    *redistest.Node    // single-node mode
	cluster *redistest.Cluster // cluster mode
	admin   []*redis.Client    // one per node, not through a proxy
	proxies []*proxy           // one per worker index (single-node mode)

	mu     sync.Mutex
	events []Event
	logw   *bufio.Writer
	store  *storage
	procs  []*proc                // the live incarnation of each worker index
	traps  map[string]func(*proc) // "<ev>/<obj>" -> run on the next such event
	errs   *os.File
}

// proc is one worker process (one incarnation of a worker index).
type proc struct {
	idx, inc int
	id       string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	inMu     sync.Mutex
	done     chan struct{}
}

func (h *harness) logf(format string, args ...any) {
	if h.cfg.Log != nil {
		fmt.Fprintf(h.cfg.Log, "torture: "+format+"\n", args...)
	}
}

// quiet drops go-redis's log lines (dial failures while Redis is down,
// by design here).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Run runs the harness and returns every event of the run, in the order
// the harness recorded them.
func Run(ctx context.Context, cfg Config) ([]Event, error) {
	redis.SetLogger(quiet{})
	for _, f := range cfg.Faults {
		if _, ok := faultKinds[f]; !ok {
			return nil, fmt.Errorf("torture: unknown fault %q (known: %s)", f, strings.Join(faultNames(), ", "))
		}
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "torture-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = dir
	}
	h := &harness{cfg: cfg, store: newStorage(), traps: map[string]func(*proc){}}
	f, err := os.Create(filepath.Join(cfg.Dir, "events.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h.logw = bufio.NewWriter(f)
	defer h.logw.Flush()
	if h.errs, err = os.Create(filepath.Join(cfg.Dir, "workers.log")); err != nil {
		return nil, err
	}
	defer h.errs.Close()

	addrs, err := h.startRedis()
	if err != nil {
		return nil, err
	}
	defer h.stopRedis()
	h.logf("redis at %s; log in %s", strings.Join(addrs, ","), cfg.Dir)

	h.procs = make([]*proc, cfg.Workers)
	for i := range cfg.Workers {
		if !cfg.Cluster {
			p, err := newProxy(addrs[0])
			if err != nil {
				return nil, err
			}
			defer p.Close()
			h.proxies = append(h.proxies, p)
		}
		if err := h.spawn(i, 0); err != nil {
			return nil, err
		}
	}
	defer h.stopWorkers()

	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	var producer sync.WaitGroup
	producer.Go(func() { h.produce(pctx, addrs) })

	tctx, stopTicks := context.WithCancel(ctx)
	defer stopTicks()
	var ticks sync.WaitGroup
	ticks.Go(func() { h.collectTicks(tctx, addrs) })

	sleep(ctx, cfg.Warmup)
	for round := range cfg.Rounds {
		for _, kind := range cfg.Faults {
			if ctx.Err() != nil {
				break
			}
			h.logf("round %d: %s", round+1, kind)
			if err := faultKinds[kind].inject(ctx, h); err != nil {
				h.logf("%s: %v", kind, err)
			}
			sleep(ctx, cfg.Settle)
		}
	}
	h.record(Event{T: mono(), Ev: evFault, Fault: "drain"})
	stopProducer()
	producer.Wait()
	h.drain(ctx)
	h.dumpWorkers()
	h.stopWorkers()
	stopTicks() // after a last pass
	ticks.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events), ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (h *harness) startRedis() ([]string, error) {
	if h.cfg.Cluster {
		c, err := redistest.StartCluster(3)
		if err != nil {
			return nil, err
		}
		h.cluster = c
		for _, n := range c.Nodes {
			h.admin = append(h.admin, redis.NewClient(&redis.Options{Addr: n.Addr}))
		}
		return c.Addrs, nil
	}
	n, err := redistest.Start()
	if err != nil {
		return nil, err
	}
	h.node = n
	h.admin = []*redis.Client{redis.NewClient(&redis.Options{Addr: n.Addr})}
	return []string{n.Addr}, nil
}

func (h *harness) stopRedis() {
	for _, a := range h.admin {
		a.Close()
	}
	if h.cluster != nil {
		h.cluster.Stop()
	}
	if h.node != nil {
		h.node.Close()
	}
}

// record appends e to the log, stamping its arrival. For a write, it
// applies it to the storage and returns the verdict.
func (h *harness) record(e Event) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.Recv = mono()
	if e.Ev == evWrite {
		e.Res = h.store.apply(e)
	}
	h.events = append(h.events, e)
	b, _ := json.Marshal(e)
	h.logw.Write(append(b, '\n'))
	return e.Res
}

// spawn starts incarnation inc of worker idx.
func (h *harness) spawn(idx, inc int) error {
	id := fmt.Sprintf("w%d.%d", idx, inc)
	args := []string{"-id", id}
	if h.cfg.Cluster {
		args = append(args, "-cluster", "-addr", strings.Join(h.cluster.Addrs, ","))
	} else {
		args = append(args, "-addr", h.proxies[idx].Addr())
	}
	cmd := h.cfg.Worker(args...)
	cmd.Stderr = h.errs
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("torture: starting worker %s: %w", id, err)
	}
	p := &proc{idx: idx, inc: inc, id: id, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	h.record(Event{T: mono(), Ev: evSpawn, W: id, Pid: cmd.Process.Pid})
	h.mu.Lock()
	h.procs[idx] = p
	h.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				continue
			}
			e.W = id
			res := h.record(e)
			if trap := h.takeTrap(e.Ev, e.Obj); trap != nil {
				trap(p) // before the verdict: the worker is mid-hold, waiting for it
			}
			if e.Ev == evWrite {
				p.inMu.Lock()
				fmt.Fprintf(p.stdin, "%d %s\n", e.Req, res)
				p.inMu.Unlock()
			}
		}
		err := cmd.Wait()
		h.record(Event{T: mono(), Ev: evExit, W: id, Err: errString(err)})
		close(p.done)
	}()
	return nil
}

// kill kills worker idx with SIGKILL and starts its next incarnation.
func (h *harness) killAndRestart(p *proc) {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	if err := h.spawn(p.idx, p.inc+1); err != nil {
		h.logf("restarting %s: %v", p.id, err)
	}
}

// dumpWorkers has every worker write its goroutines to workers.log
// (SIGUSR1), so that a waiter that never woke shows where it waits.
func (h *harness) dumpWorkers() {
	h.mu.Lock()
	procs := slices.Clone(h.procs)
	h.mu.Unlock()
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(50 * time.Millisecond)
	}
}

// stopWorkers asks every worker to stop (SIGTERM: they release what they
// hold) and kills those still running after 5s.
func (h *harness) stopWorkers() {
	h.mu.Lock()
	procs := slices.Clone(h.procs)
	h.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
}

func (h *harness) takeTrap(ev, obj string) func(*proc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := ev + "/" + obj
	trap := h.traps[key]
	delete(h.traps, key)
	return trap
}

// onNext runs f on the worker of the next ev event on obj (a write: f
// runs before the worker gets the storage's verdict, so it is in the
// middle of its hold, between two checks of its lease), in the goroutine
// that reads that worker's events, and returns the worker; if none comes
// within 2s, it runs f on a random worker.
func (h *harness) onNext(ctx context.Context, ev, obj string, f func(*proc)) *proc {
	done := make(chan *proc, 1)
	trap := func(p *proc) { f(p); done <- p }
	h.mu.Lock()
	h.traps[ev+"/"+obj] = trap
	h.mu.Unlock()
	select {
	case p := <-done:
		return p
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	if h.takeTrap(ev, obj) == nil { // it fired meanwhile
		return <-done
	}
	h.mu.Lock()
	p := h.procs[rand.IntN(len(h.procs))]
	h.mu.Unlock()
	trap(p)
	return <-done
}

// produce offers a message every 20ms, each with a new id, directly to
// Redis (not through a proxy). An offer that fails is logged with its
// error: it may have landed or not.
func (h *harness) produce(ctx context.Context, addrs []string) {
	var rdb redis.UniversalClient
	if h.cfg.Cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: addrs[0]})
	}
	defer rdb.Close()
	rt := lockrt.New(rdb, lockrt.WithID("producer"))
	defer rt.Close()
	q := tortureobj.NewQueues(rt).Jobs()
	for seq := 1; ctx.Err() == nil; seq++ {
		msg := "m" + strconv.Itoa(seq)
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		tcall := mono()
		_, err := q.Offer(octx, msg)
		cancel()
		h.record(Event{T: mono(), TCall: tcall, Ev: evOffer, Obj: objJobs, Msg: msg, Err: errString(err)})
		sleep(ctx, 20*time.Millisecond)
	}
}

// collectTicks drains the schedule's queue every 250 ms, recording each
// tick (evTick), until ctx ends and one last pass found it empty. Items
// not drained yet when Redis restarts empty are lost with it; the
// checker knows.
func (h *harness) collectTicks(ctx context.Context, addrs []string) {
	var rdb redis.UniversalClient
	if h.cfg.Cluster {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: addrs[0]})
	}
	defer rdb.Close()
	rt := lockrt.New(rdb, lockrt.WithID("ticks"))
	defer rt.Close()
	key := tortureobj.NewQueues(rt).Ticks().Key()
	offset := time.Now().UnixNano() - mono() // unix ns minus mono ns
	for {
		last := ctx.Err() != nil
		for {
			pctx, cancel := context.WithTimeout(context.Background(), time.Second)
			items, err := rdb.LPopCount(pctx, key, 100).Result()
			cancel()
			if err != nil || len(items) == 0 {
				break
			}
			for _, it := range items {
				ms, err := strconv.ParseInt(it[min(3, len(it)):], 10, 64) // after the envelope's header
				if err != nil {
					h.record(Event{T: mono(), Ev: evTick, Obj: objTicks, Err: fmt.Sprintf("item %q", it)})
					continue
				}
				h.record(Event{T: ms*1e6 - offset, Ev: evTick, Obj: objTicks, Msg: strconv.FormatInt(ms, 10)})
			}
		}
		if last {
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// drain tells the workers to stop offering, then waits until every
// message offered since the last Redis restart has been acknowledged, for
// at most two visibility timeouts and 3s.
func (h *harness) drain(ctx context.Context) {
	h.mu.Lock()
	procs := slices.Clone(h.procs)
	h.mu.Unlock()
	for _, p := range procs { // workers stop offering
		p.inMu.Lock()
		fmt.Fprintln(p.stdin, "drain")
		p.inMu.Unlock()
	}
	deadline := time.Now().Add(2*lease + 3*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		h.mu.Lock()
		pending := map[string]bool{}
		for _, e := range h.events {
			switch {
			case e.Ev == evFault && e.Fault == "redis-restart":
				clear(pending) // gone with the restart; the checker counts them

			case e.Ev == evOffer && e.Err == "":
				pending[e.Msg] = true
			case e.Ev == evAck && e.Err == "":
				delete(pending, e.Msg)
			}
		}
		h.mu.Unlock()
		if len(pending) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// errNoTarget is returned by a fault that needs something this mode lacks.
var errNoTarget = errors.New("not available in this mode")

// redisNodes returns the nodes a Redis restart kills: the node, or in
// cluster mode every primary.
func (h *harness) redisNodes() []*redistest.Node {
	if h.cluster != nil {
		return h.cluster.Nodes
	}
	return []*redistest.Node{h.node}
}
