package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchlocks"
)

// The watchdog benchmark: one runtime client holds many locks (the
// generated Watched lock, lease 6s, renewed every 2s) while another
// process PINGs the same redis-server on a connection of its own. The
// pings that overlap one of the watchdog's renewal pipelines (recorded by
// a go-redis hook on the holder's client) say how long a renewal round
// stalls the other clients of the Redis; the pings of the same run that
// overlap none are the baseline.

// pingerEnv names the address a pinger child process pings; see TestMain.
const pingerEnv = "LOCKGEN_BENCH_PINGER"

// pinger is the child process: it PINGs addr every 200µs until its stdin
// closes, then prints one line per ping: its start (Unix ns) and how long
// it took (ns).
func pinger(addr string) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	type ping struct{ start, took int64 }
	var pings []ping
	fmt.Println("ready")
	for {
		select {
		case <-done:
			w := bufio.NewWriter(os.Stdout)
			for _, p := range pings {
				fmt.Fprintf(w, "%d %d\n", p.start, p.took)
			}
			_ = w.Flush()
			return 0
		default:
		}
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pings = append(pings, ping{start.UnixNano(), int64(time.Since(start))})
		time.Sleep(200 * time.Microsecond)
	}
}

// pipeRecorder is a go-redis hook recording every pipeline a client runs:
// when it started and ended (Unix ns) and how many commands it carried.
type pipeRecorder struct {
	mu    sync.Mutex
	pipes []pipeRun
}

type pipeRun struct {
	start, end int64
	cmds       int
}

func (h *pipeRecorder) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *pipeRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *pipeRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now().UnixNano()
		err := next(ctx, cmds)
		end := time.Now().UnixNano()
		h.mu.Lock()
		h.pipes = append(h.pipes, pipeRun{start, end, len(cmds)})
		h.mu.Unlock()
		return err
	}
}

// watchdogResult is one measurement window of watchdogRun.
type watchdogResult struct {
	during, outside []time.Duration // pings overlapping a renewal pipeline, and the others, sorted
	pipes           int             // renewal pipelines
	maxCmds         int             // commands in the largest one
	renewed         int             // commands in all of them
	redisTime       time.Duration   // Redis' time running them (commandstats usec of evalsha)
	calls           int64           // EVALSHA calls Redis ran meanwhile
	inBytes         int64           // bytes Redis read meanwhile (INFO stats total_net_input_bytes)
}

// queryChunk is how much of a client's query buffer Redis 7 reads and
// runs at once (PROTO_IOBUF_LEN) before it serves the other clients: a
// pipeline is run in chunks of this many bytes.
const queryChunk = 16 * 1024

// chunkTime is the Redis time one query chunk of r's renewals costs: the
// renewals one chunk holds (queryChunk over the bytes of one renewal, or
// the largest pipeline when smaller) times Redis' time per renewal. That
// is about the longest another client's command waits for them.
func (r watchdogResult) chunkTime() (perRenewal time.Duration, bytes float64, chunk time.Duration) {
	if r.calls == 0 || r.renewed == 0 {
		return 0, 0, 0
	}
	perRenewal = r.redisTime / time.Duration(r.calls)
	bytes = float64(r.inBytes) / float64(r.renewed)
	n := min(float64(queryChunk)/bytes, float64(r.maxCmds))
	return perRenewal, bytes, time.Duration(n * float64(perRenewal))
}

// statInt returns the integer field name of INFO section.
func statInt(tb testing.TB, section, name string) int64 {
	for line := range strings.Lines(info(tb, section)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatalf("INFO %s lacks %s", section, name)
	return 0
}

// evalshaTime returns the time Redis spent running EVALSHA so far, and
// its calls.
func evalshaTime(tb testing.TB) (time.Duration, int64) {
	for line := range strings.Lines(info(tb, "commandstats")) {
		// cmdstat_evalsha:calls=12,usec=345,...
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			field := func(name string) int64 {
				_, v, _ := strings.Cut(rest, name+"=")
				v, _, _ = strings.Cut(v, ",")
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					tb.Fatal(err)
				}
				return n
			}
			return time.Duration(field("usec")) * time.Microsecond, field("calls")
		}
	}
	return 0, 0
}

// renewer holds many locks in the benchmark's Redis and renews them.
type renewer struct {
	name string
	// hold takes held locks, renewed by a client whose pipelines rec
	// records, and returns a func that stops renewing and drops them.
	hold func(tb testing.TB, held int, rec *pipeRecorder) (stop func())
}

var (
	// lockgen: the generated Watched lock through one runtime client.
	lockgenRenewer = renewer{"lockgen", holdLockgen}
	// one-pipeline: what lockgen's watchdog did before its pipelines
	// were bounded: every lock due is renewed in one pipeline per round.
	onePipeRenewer = renewer{"one-pipeline", holdOnePipe}
	// none: nothing held, nothing renewed; the pings of its windows are
	// the machine's own latency, the baseline of the others.
	noRenewer = renewer{"none", func(testing.TB, int, *pipeRecorder) func() { return func() {} }}
)

func holdLockgen(tb testing.TB, held int, rec *pipeRecorder) func() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	rdb.AddHook(rec)
	c := lockrt.New(rdb)
	stop := func() {
		c.Close()
		rdb.Close()
	}
	if err := benchlocks.Preload(ctx, c); err != nil {
		stop()
		tb.Fatal(err)
	}
	locks := benchlocks.NewLocks(c)
	// Take them from 16 goroutines, as a busy service would.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < held; i += 16 {
				if _, err := locks.Watched(strconv.Itoa(i)).Lock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		stop()
		tb.Fatal(err)
	}
	return stop
}

// onePipeRenew is a compare-and-pexpire, as costly as lockgen's renewal.
var onePipeRenew = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[2] then return redis.call('pexpire', KEYS[1], ARGV[1]) end return 0`)

func holdOnePipe(tb testing.TB, held int, rec *pipeRecorder) func() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	keys := make([]string, held)
	for i := range keys {
		keys[i] = "bench:{onepipe:" + strconv.Itoa(i) + "}"
	}
	for i := 0; i < held; i += 1000 {
		pipe := rdb.Pipeline()
		for _, k := range keys[i:min(i+1000, held)] {
			pipe.Set(ctx, k, "owner", 6*time.Second)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	if err := onePipeRenew.Load(ctx, rdb).Err(); err != nil {
		tb.Fatal(err)
	}
	rdb.AddHook(rec)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			pipe := rdb.Pipeline()
			for _, k := range keys {
				onePipeRenew.EvalSha(ctx, pipe, []string{k}, 6000, "owner")
			}
			_, _ = pipe.Exec(ctx)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		rdb.Close()
	}
}

// watchdogRun has r hold held locks, then measures another process's
// PINGs for window while they are renewed. With realtime, the pinger
// runs under the SCHED_FIFO policy (chrt -f), as redis-server then does
// (see withRealtimeRedis): the holder's process cannot delay either.
func watchdogRun(tb testing.TB, r renewer, held int, window time.Duration, realtime bool) watchdogResult {
	flush(tb)
	defer flush(tb)
	rec := &pipeRecorder{}
	stop := r.hold(tb, held, rec)
	defer stop()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if realtime {
		cmd = exec.Command("chrt", "-f", rtPriority, os.Args[0], "-test.run=^$")
	}
	cmd.Env = append(os.Environ(), pingerEnv+"="+node.Addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		tb.Fatalf("pinger: %v", out.Err())
	}
	from := time.Now().UnixNano()
	spent, calls := evalshaTime(tb)
	inBytes := statInt(tb, "stats", "total_net_input_bytes")
	time.Sleep(window)
	inBytes = statInt(tb, "stats", "total_net_input_bytes") - inBytes
	spentEnd, callsEnd := evalshaTime(tb)
	spent, calls = spentEnd-spent, callsEnd-calls
	stdin.Close()
	type ping struct{ start, end int64 }
	var pings []ping
	for out.Scan() {
		f := strings.Fields(out.Text())
		start, _ := strconv.ParseInt(f[0], 10, 64)
		took, _ := strconv.ParseInt(f[1], 10, 64)
		pings = append(pings, ping{start, start + took})
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("pinger: %v", err)
	}

	rec.mu.Lock()
	var pipes []pipeRun
	for _, p := range rec.pipes {
		if p.end >= from {
			pipes = append(pipes, p)
		}
	}
	rec.mu.Unlock()
	res := watchdogResult{redisTime: spent, calls: calls, inBytes: inBytes}
	for _, p := range pipes {
		res.pipes++
		res.renewed += p.cmds
		res.maxCmds = max(res.maxCmds, p.cmds)
	}
	for _, pg := range pings {
		d := time.Duration(pg.end - pg.start)
		if slices.ContainsFunc(pipes, func(p pipeRun) bool { return pg.start < p.end && p.start < pg.end }) {
			res.during = append(res.during, d)
		} else {
			res.outside = append(res.outside, d)
		}
	}
	slices.Sort(res.during)
	slices.Sort(res.outside)
	return res
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// BenchmarkWatchdog: 10 000 and 50 000 locks held by one client and
// renewed every 2s, by lockgen's watchdog and by one-pipeline (one
// pipeline of every lock per round, what the watchdog did before), in
// alternating windows of 4.5s, 3 each, with a window of none (nothing
// held) between them; another process PINGs the Redis every 200µs
// meanwhile. Metrics, medians over the windows: the max and p99 of the
// pings overlapping one of the renewer's pipelines (<renewer>-max-µs,
// <renewer>-p99-µs), the max and p99 of every ping of none's windows
// (none-max-µs, none-p99-µs: what this machine does to a PING with no
// renewal at all), the p99 of the pings overlapping none of a renewer's
// pipelines (idle-p99-µs), the time Redis spent running one pipeline's
// scripts (<renewer>-redis-µs/pipe, from INFO commandstats: how long a
// pipeline can keep Redis from serving anyone else), Redis' time per
// renewal (<renewer>-redis-µs/renewal), the bytes of one renewal as Redis
// read them (renewal-bytes, INFO stats), the Redis time of one 16 KB
// query chunk of renewals (<renewer>-redis-µs/chunk: Redis runs a client's
// pipeline a chunk at a time between other clients' commands, so this
// bounds what the renewals alone make another command wait), lockgen's
// renewal pipelines per window and its largest one's commands. Run it
// with -benchtime 1x: one iteration is the 9 windows (b.N is not used
// otherwise):
//
//	go test -run '^$' -bench 'BenchmarkWatchdog$' -benchtime 1x
func BenchmarkWatchdog(b *testing.B) { benchmarkWatchdog(b, false) }

// BenchmarkWatchdogRealtime is BenchmarkWatchdog with redis-server and the
// pinger under the SCHED_FIFO policy (chrt -f; it needs root or
// CAP_SYS_NICE): on a machine whose few cores Redis shares with the
// holder, this keeps the holder's own CPU use (taking, renewing and
// decoding 50 000 locks) from delaying Redis or the pinger, so what is
// left in the max is what Redis spends on the renewals before it serves
// the PING.
//
//	go test -run '^$' -bench 'BenchmarkWatchdogRealtime' -benchtime 1x
func BenchmarkWatchdogRealtime(b *testing.B) {
	defer withRealtimeRedis(b)()
	benchmarkWatchdog(b, true)
}

// rtPriority is the SCHED_FIFO priority of BenchmarkWatchdogRealtime.
const rtPriority = "10"

// withRealtimeRedis puts node's redis-server under SCHED_FIFO and returns
// the func that puts it back under SCHED_OTHER.
func withRealtimeRedis(tb testing.TB) func() {
	pid := strconv.FormatInt(statInt(tb, "server", "process_id"), 10)
	if out, err := exec.Command("chrt", "-f", "-p", rtPriority, pid).CombinedOutput(); err != nil {
		tb.Fatalf("chrt -f -p %s %s: %v: %s", rtPriority, pid, err, out)
	}
	return func() {
		if out, err := exec.Command("chrt", "-o", "-p", "0", pid).CombinedOutput(); err != nil {
			tb.Errorf("chrt -o -p 0 %s: %v: %s", pid, err, out)
		}
	}
}

func benchmarkWatchdog(b *testing.B, realtime bool) {
	const window, rounds = 4500 * time.Millisecond, 3
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, held := range []int{10_000, 50_000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			for b.Loop() {
				maxes, p99s := map[string][]float64{}, map[string][]float64{}
				var idle, pipes, largest []float64
				perPipe, perCall, perChunk := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
				var renewalBytes []float64
				for range rounds {
					for _, r := range []renewer{lockgenRenewer, noRenewer, onePipeRenewer} {
						res := watchdogRun(b, r, held, window, realtime)
						if r.name == noRenewer.name {
							if len(res.outside) > 0 {
								maxes[r.name] = append(maxes[r.name], us(res.outside[len(res.outside)-1]))
								p99s[r.name] = append(p99s[r.name], us(percentile(res.outside, 99)))
							}
							continue
						}
						if len(res.during) > 0 {
							maxes[r.name] = append(maxes[r.name], us(res.during[len(res.during)-1]))
							p99s[r.name] = append(p99s[r.name], us(percentile(res.during, 99)))
						}
						idle = append(idle, us(percentile(res.outside, 99)))
						if res.pipes > 0 {
							perPipe[r.name] = append(perPipe[r.name], us(res.redisTime)/float64(res.pipes))
							perRenewal, bytes, chunk := res.chunkTime()
							perCall[r.name] = append(perCall[r.name], us(perRenewal))
							perChunk[r.name] = append(perChunk[r.name], us(chunk))
							renewalBytes = append(renewalBytes, bytes)
						}
						if r.name == "lockgen" {
							pipes = append(pipes, float64(res.pipes))
							largest = append(largest, float64(res.maxCmds))
						}
					}
				}
				for _, name := range []string{"lockgen", "one-pipeline", noRenewer.name} {
					b.ReportMetric(slices.Max(append([]float64{0}, maxes[name]...)), name+"-worst-max-µs")
				}
				for _, name := range []string{"lockgen", "one-pipeline"} {
					b.ReportMetric(median(maxes[name]), name+"-max-µs")
					b.ReportMetric(median(p99s[name]), name+"-p99-µs")
					b.ReportMetric(median(perPipe[name]), name+"-redis-µs/pipe")
					b.ReportMetric(median(perCall[name]), name+"-redis-µs/renewal")
					b.ReportMetric(median(perChunk[name]), name+"-redis-µs/chunk")
				}
				b.ReportMetric(median(maxes[noRenewer.name]), "none-max-µs")
				b.ReportMetric(median(p99s[noRenewer.name]), "none-p99-µs")
				b.ReportMetric(median(idle), "idle-p99-µs")
				b.ReportMetric(median(renewalBytes), "renewal-bytes")
				b.ReportMetric(median(pipes), "lockgen-pipes")
				b.ReportMetric(median(largest), "lockgen-max-pipe-cmds")
			}
		})
	}
}

// TestWatchdogPing runs one window of the benchmark for 1 000 locks held
// through lockgen and checks that they were renewed in bounded pipelines
// while the other process pinged (every lock at least once in 2 rounds).
func TestWatchdogPing(t *testing.T) {
	res := watchdogRun(t, lockgenRenewer, 1000, 4500*time.Millisecond, false)
	if res.renewed < 1000 {
		t.Fatalf("%d renewals of 1000 held locks in 2 rounds", res.renewed)
	}
	if res.maxCmds > 64 { // the runtime's maxPipeline
		t.Fatalf("a renewal pipeline carried %d commands", res.maxCmds)
	}
	if len(res.during)+len(res.outside) == 0 {
		t.Fatal("no pings")
	}
	t.Logf("%d pipelines, largest %d commands, %d renewals; %d pings during them, %d outside",
		res.pipes, res.maxCmds, res.renewed, len(res.during), len(res.outside))
}
