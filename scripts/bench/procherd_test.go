package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The herd across real processes: BenchmarkHerd's lockers are goroutines
// of one test process, each over a go-redis client and a runtime client of
// its own. Here each locker is a child process (this test binary run
// again, see TestMain) with its own go-redis client and runtime client, so
// that nothing (the runtime's pub/sub connection, its scheduler, the Go
// runtime) can be shared between the waiters: the evidence that the counts
// are not an artifact of one process.

// herdChildEnv holds a child's job: "lib addrs id hold", e.g.
// "lockgen 127.0.0.1:7001 herd8-0 1ms"; with several addresses (a
// cluster's, comma-separated) the child runs the library of
// clusterHerdLibs over a redis.ClusterClient.
const herdChildEnv = "LOCKGEN_BENCH_HERD_CHILD"

// procHerdLibs are the libraries a child can run on a single node, by name.
var procHerdLibs = herdLibs

// procTarget is the Redis deployment of a herd (of processes, or of
// clients over many keys): its addresses (one for a single node) and how
// to read what it ran.
type procTarget struct {
	addrs    []string
	stats    func() map[string]int64 // INFO commandstats calls by command (a cluster's summed, with busPublish)
	channels func() int              // pub/sub channels with subscribers, classic and sharded
	cpu      func() time.Duration    // redis-server CPU time (a cluster's summed)
}

// singleTarget is node, the benchmarks' redis-server.
func singleTarget(tb testing.TB) procTarget {
	probe := newRedis(tb)
	return procTarget{
		addrs:    []string{node.Addr},
		stats:    func() map[string]int64 { return commandStats(tb) },
		channels: func() int { return subscribedChannels(tb, probe) },
		cpu:      func() time.Duration { return redisCPU(tb) },
	}
}

// clusterTarget is the cluster of nodes, counted over every node.
func clusterTarget(tb testing.TB, nodes []*redis.Client) procTarget {
	t := procTarget{
		stats: func() map[string]int64 { return clusterStats(tb, nodes) },
		channels: func() int {
			n := 0
			for _, node := range nodes {
				n += subscribedChannels(tb, node)
			}
			return n
		},
		cpu: func() time.Duration {
			var d time.Duration
			for _, node := range nodes {
				d += nodeCPU(tb, node)
			}
			return d
		},
	}
	for _, n := range nodes {
		t.addrs = append(t.addrs, n.Options().Addr)
	}
	return t
}

// openChildLocker opens the child's locker of the library name over a
// client of addrs (a cluster client when there are several).
func openChildLocker(tb testing.TB, name string, addrs []string) (locker, error) {
	if len(addrs) > 1 {
		i := slices.IndexFunc(clusterHerdLibs, func(l clusterHerdLib) bool { return l.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown cluster library %q", name)
		}
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		tb.Cleanup(func() { rdb.Close() })
		return clusterHerdLibs[i].open(tb, rdb), nil
	}
	i := slices.IndexFunc(procHerdLibs, func(l lib) bool { return l.name == name })
	if i < 0 {
		return nil, fmt.Errorf("unknown library %q", name)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addrs[0]})
	tb.Cleanup(func() { rdb.Close() })
	return procHerdLibs[i].open(tb, rdb), nil
}

// childTB is the testing.TB of a child process, for the libraries' open
// functions: Fatal exits the process, Cleanup runs at its end. Other
// methods are not called (the embedded nil TB would panic).
type childTB struct {
	testing.TB
	cleanups []func()
}

func (c *childTB) Helper()           {}
func (c *childTB) Cleanup(f func())  { c.cleanups = append(c.cleanups, f) }
func (c *childTB) Fatal(args ...any) { c.Fatalf("%s", fmt.Sprint(args...)) }
func (c *childTB) Fatalf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, f+"\n", a...)
	os.Exit(1)
}

func (c *childTB) close() {
	for _, f := range slices.Backward(c.cleanups) {
		f()
	}
}

// herdChild is a child process: it opens the locker of its library, warms
// it up and prints "ready"; on the line "go" it loops lock, hold, unlock
// on one lock, printing "a <unix ns>" once it holds and "r <unix ns>"
// before it unlocks, until the line "stop" (or the end of stdin); then it
// prints "done" and waits for stdin to close before it closes its clients,
// so that their closing is not counted.
func herdChild(job string) int {
	f := strings.Fields(job)
	if len(f) != 4 {
		fmt.Fprintf(os.Stderr, "%s=%q: want lib addrs id hold\n", herdChildEnv, job)
		return 2
	}
	hold, err := time.ParseDuration(f[3])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", herdChildEnv, job, err)
		return 2
	}
	tb := &childTB{}
	defer tb.close()
	l, err := openChildLocker(tb, f[0], strings.Split(f[1], ","))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", herdChildEnv, job, err)
		return 2
	}
	warmUp(tb, l)
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, a ...any) {
		fmt.Fprintf(out, format+"\n", a...)
		out.Flush()
	}
	in := bufio.NewScanner(os.Stdin)
	say("ready")
	if !in.Scan() || in.Text() != "go" {
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		in.Scan() // "stop", or the end of stdin
		stop()
	}()
	for ctx.Err() == nil {
		if err := l.lock(ctx, f[2]); err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintln(os.Stderr, "lock:", err)
			return 1
		}
		say("a %d", time.Now().UnixNano())
		time.Sleep(hold)
		say("r %d", time.Now().UnixNano())
		if err := l.unlock(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "unlock:", err)
			return 1
		}
	}
	say("done")
	for in.Scan() { // stop's Scan has returned: ctx is done
	}
	return 0
}

// procEvent is one line of a child: kind 'y' ready, 'a' acquired, 'r'
// releasing, 'd' done, 'x' its stdout ended.
type procEvent struct {
	proc int
	kind byte
	at   int64 // unix ns, for 'a' and 'r'
}

// procKinds are the kinds of the children's lines.
var procKinds = map[string]byte{"ready": 'y', "a": 'a', "r": 'r', "done": 'd'}

// procHerd runs one herd of n child processes of the library name on
// target, on the lock id
// until it was taken total times (a few more acquisitions may complete
// while the children stop; they are counted), and counts what Redis ran
// meanwhile (INFO commandstats, after every child was ready and before
// any closed its clients). It fails when two children held at once or a
// child failed.
func procHerd(tb testing.TB, target procTarget, name string, n int, id string, total int, hold time.Duration) (herdResult, error) {
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	events := make(chan procEvent, 64*n)
	stdins := make([]io.WriteCloser, n)
	cmds := make([]*exec.Cmd, n)
	stderrs := make([]bytes.Buffer, n)
	send := func(line string) {
		for _, w := range stdins {
			io.WriteString(w, line+"\n") // a child that died is reported by Wait
		}
	}
	defer func() {
		for i, c := range cmds {
			if c == nil || c.Process == nil {
				continue
			}
			stdins[i].Close()
			timer := time.AfterFunc(30*time.Second, func() { c.Process.Kill() })
			c.Wait()
			timer.Stop()
		}
	}()
	for i := range n {
		c := exec.Command(exe, "-test.run=^$")
		c.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %s", herdChildEnv, name, strings.Join(target.addrs, ","), id, hold))
		c.Stderr = &stderrs[i]
		if stdins[i], err = c.StdinPipe(); err != nil {
			tb.Fatal(err)
		}
		stdout, err := c.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if err := c.Start(); err != nil {
			tb.Fatal(err)
		}
		cmds[i] = c
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				kind, at, _ := strings.Cut(sc.Text(), " ")
				ns, _ := strconv.ParseInt(at, 10, 64)
				if k, ok := procKinds[kind]; ok {
					events <- procEvent{proc: i, kind: k, at: ns}
				}
			}
			events <- procEvent{proc: i, kind: 'x'}
		}()
	}
	deadline := time.After(3 * time.Minute)
	childFailed := func(i int) error {
		cmds[i].Wait()
		return fmt.Errorf("child %d ended: %v: %s", i, cmds[i].ProcessState, strings.TrimSpace(stderrs[i].String()))
	}
	// Wait until every child is ready.
	for ready := 0; ready < n; {
		select {
		case e := <-events:
			switch e.kind {
			case 'y':
				ready++
			case 'x':
				return herdResult{}, childFailed(e.proc)
			}
		case <-deadline:
			return herdResult{}, fmt.Errorf("%d of %d children ready after 3 minutes", ready, n)
		}
	}
	before := target.stats()
	send("go")
	var (
		log     []procEvent
		taken   int
		done    int
		stopped bool
	)
	for done < n {
		select {
		case e := <-events:
			switch e.kind {
			case 'a':
				if taken++; taken == total && !stopped {
					send("stop")
					stopped = true
				}
				log = append(log, e)
			case 'r':
				log = append(log, e)
			case 'd':
				done++
			case 'x':
				return herdResult{}, childFailed(e.proc)
			}
		case <-deadline:
			return herdResult{}, fmt.Errorf("%d acquisitions and %d of %d children done after 3 minutes", taken, done, n)
		}
	}
	res := herdResult{acquisitions: taken, perClient: make([]int, n)}
	res.count(before, target.stats())
	return res, res.replay(log)
}

// replay fills r's hand-offs, per-client counts and re-takes from the
// children's events in time order, and says whether two held at once.
func (r *herdResult) replay(log []procEvent) error {
	slices.SortStableFunc(log, func(a, b procEvent) int { return int(a.at - b.at) })
	holder, last := -1, -1
	var released int64
	for _, e := range log {
		switch e.kind {
		case 'a':
			if holder >= 0 {
				return fmt.Errorf("children %d and %d held at once", holder, e.proc)
			}
			if last >= 0 {
				r.handoffs = append(r.handoffs, time.Duration(e.at-released))
			}
			if last == e.proc {
				r.self++
			}
			r.perClient[e.proc]++
			holder = e.proc
		case 'r':
			if holder != e.proc {
				return fmt.Errorf("child %d released a lock held by %d", e.proc, holder)
			}
			holder, last, released = -1, e.proc, e.at
		}
	}
	if len(log) > 0 {
		r.elapsed = time.Duration(log[len(log)-1].at - log[0].at)
	}
	return nil
}

// BenchmarkHerdProcesses is BenchmarkHerd with every locker a child
// process: N = 8, 32, 64 processes, each its own go-redis client and (for
// lockgen) runtime client, loop lock, a 1ms hold, unlock on one lock, 1000
// acquisitions per run; each round runs every library once, in rotated
// order; medians over the rounds (-benchtime 3x or more). Per library:
// EVALSHA and commands per acquisition (INFO commandstats), hand-off
// p50/p99 (between processes, on the wall clock), how often the releaser
// took the lock straight back, and the acquisitions per process. On
// /cluster the same on a 3-primary cluster, each process over a cluster
// client of its own (lockgen and redislock), with the cluster bus's
// publish messages.
func BenchmarkHerdProcesses(b *testing.B) {
	b.Run("single", func(b *testing.B) { benchProcHerd(b, singleTarget(b), libNames(procHerdLibs), "processes") })
	b.Run("cluster", func(b *testing.B) {
		_, nodes := startBenchCluster(b)
		benchProcHerd(b, clusterTarget(b, nodes), clusterLibNames(), "cluster processes")
	})
}

func benchProcHerd(b *testing.B, target procTarget, libs []string, what string) {
	for _, n := range []int{8, 32, 64} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			runs := make([][]herdStats, len(libs))
			rotatedRounds(b, len(libs), func(i, round int) {
				res, err := procHerd(b, target, libs[i], n, fmt.Sprintf("pherd%d-%d-%s", n, round, libs[i]), 1000, time.Millisecond)
				if err != nil {
					b.Fatal(err)
				}
				runs[i] = append(runs[i], res.stats())
			})
			reportHerd(b, what+" N="+strconv.Itoa(n), libs, runs, len(target.addrs) > 1)
		})
	}
}

// TestHerdProcesses: lockgen's herd of 8, 32 and 64 child processes on a
// single node, and of 8 on a 3-primary cluster, 10 acquisitions per
// process with a 200µs hold: at most 2.5 EVALSHA per acquisition (INFO
// commandstats), every process acquires, no two hold at once, and on the
// cluster no publish message crosses the bus (SPUBLISH). The control,
// redislock retrying every 1ms in 8 processes, must run more than 2.5
// (each waiting process retries): the count sees every process's scripts.
func TestHerdProcesses(t *testing.T) {
	_, nodes := startBenchCluster(t)
	single, cluster := singleTarget(t), clusterTarget(t, nodes)
	for _, c := range []struct {
		where  string
		target procTarget
		lib    string
		n      int
	}{{"single", single, lockgenReentrant.name, 8}, {"single", single, lockgenReentrant.name, 32},
		{"single", single, lockgenReentrant.name, 64}, {"cluster", cluster, lockgenReentrant.name, 8}, {"single", single, redislockLinear.name, 8}} {
		t.Run(fmt.Sprintf("%s/%s/N=%d", c.where, c.lib, c.n), func(t *testing.T) {
			res, err := procHerd(t, c.target, c.lib, c.n, fmt.Sprintf("pherd-test-%s-%s-%d", c.where, c.lib, c.n), 10*c.n, 200*time.Microsecond)
			if err != nil {
				t.Fatal(err)
			}
			s := res.stats()
			t.Logf("%s, %s, %d processes, %d acquisitions: %.2f EVALSHA, %.1f commands and %.2f bus publish messages per acquisition, releaser re-took %.1f%%, per process %v",
				c.where, c.lib, c.n, res.acquisitions, s.evalsha, s.commands, s.bus, s.selfPct, s.dist)
			if c.lib != lockgenReentrant.name {
				if s.evalsha <= 2.5 {
					t.Errorf("control %s: %.2f EVALSHA per acquisition with %d polling processes, want > 2.5", c.lib, s.evalsha, c.n)
				}
				return
			}
			if s.evalsha > 2.5 {
				t.Errorf("%.2f EVALSHA per acquisition with %d waiting processes, want <= 2.5", s.evalsha, c.n)
			}
			if u := s.unserved(); u > 0 {
				t.Errorf("%d of %d processes never acquired (per process %v)", u, c.n, res.perClient)
			}
			if res.busPublish != 0 {
				t.Errorf("%d publish messages crossed the cluster bus, want 0", res.busPublish)
			}
		})
	}
}
