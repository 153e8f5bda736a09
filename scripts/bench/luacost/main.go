// Command luacost counts the instructions Redis spends per limiter
// decision, lockgen's three algorithms against go-redis/redis_rate, and
// per empty script call of each one's shape (keys and arguments), with
// valgrind's callgrind: counts, which a shared machine does not move the
// way it moves times (scripts/bench/README.md, "Issue 27's limiter
// counted in instructions").
//
// It starts a redis-server of its own on a free port under valgrind
// (valgrind and redis-server in PATH), makes -warm calls of a case, zeroes
// the counters (callgrind_control -z), makes -n calls and dumps them
// (callgrind_control -d): the whole server's instructions (reading the
// request, the script, the reply) divided by -n. Every decision is
// allowed, through the runtime's generated limiters (benchlimits) and
// redis_rate's Limiter, one key each, as an application calls them.
//
//	go run ./luacost -n 2000
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchlimits"
)

func main() {
	n := flag.Int("n", 2000, "calls counted per case")
	warm := flag.Int("warm", numKeys, "calls per case before the count (at least one a key: the first decision on a key writes its config)")
	flag.Parse()
	if err := run(*n, *warm); err != nil {
		log.Fatal(err)
	}
}

// numKeys is how many limiters each case cycles through: each sees a
// decision every numKeys calls, well under its rate of 100 a second, and
// often enough that its state lives on (a GCRA state a second after its
// last write), so that every decision is an allowed one on a limiter in
// use, the full write path.
const numKeys = 256

// id is the key of the ith call.
func id(i int) string { return "l" + strconv.Itoa(i%numKeys) }

// call is one case: one call to Redis, the ith.
type call func(ctx context.Context, i int) error

func run(n, warm int) error {
	dir, err := os.MkdirTemp("", "luacost")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return err
	}
	srv := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(dir, "cg.%p"),
		"redis-server", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", dir)
	if err := srv.Start(); err != nil {
		return fmt.Errorf("starting redis-server under valgrind: %w", err)
	}
	defer func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	}()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for ready := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(ready) {
			return errors.New("redis-server under valgrind did not listen within a minute")
		}
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute})
	defer rdb.Close()

	c := lockrt.New(rdb)
	defer c.Close()
	if err := benchlimits.Preload(ctx, c); err != nil {
		return err
	}
	limits := benchlimits.NewLimiters(c)
	allow := func(which func(*benchlimits.Limiters, string) *lockrt.Limiter) call {
		return func(ctx context.Context, i int) error {
			r, err := which(limits, id(i)).Allow(ctx)
			if err == nil && !r.Allowed {
				err = errors.New("denied")
			}
			return err
		}
	}
	rr := redis_rate.NewLimiter(rdb)
	one, err := rdb.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		return err
	}
	empty := func(keys []string, args ...any) call {
		return func(ctx context.Context, _ int) error {
			return rdb.EvalSha(ctx, one, keys, args...).Err()
		}
	}
	cases := []struct {
		name string
		call call
	}{
		{"lockgen gcra", allow((*benchlimits.Limiters).GCRA)},
		{"lockgen token-bucket", allow((*benchlimits.Limiters).Bucket)},
		{"lockgen sliding-window", allow((*benchlimits.Limiters).Window)},
		{"redis_rate", func(ctx context.Context, i int) error {
			r, err := rr.Allow(ctx, "redis_rate:"+id(i), redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Second})
			if err == nil && r.Allowed == 0 {
				err = errors.New("denied")
			}
			return err
		}},
		{"return 1, one key, no argument", empty([]string{"{l}"})},
		{"return 1, redis_rate's shape (1 key, 4 arguments)", empty([]string{"{l}"}, 10, 100, 1, 1)},
		{"return 1, a lockgen decision's shape (3 keys, 6 arguments)", empty([]string{"{l}:cfg", "{l}:gcra", "{l}:cfgv"},
			"gcra 100 1000000 100 overall", 1, 61000, 0, 0, "0123456789.abc")},
	}
	for _, cs := range cases {
		for i := range warm {
			if err := cs.call(ctx, i); err != nil {
				return fmt.Errorf("%s: %w", cs.name, err)
			}
		}
		if err := callgrind("-z", srv.Process.Pid); err != nil {
			return err
		}
		for i := range n {
			if err := cs.call(ctx, warm+i); err != nil {
				return fmt.Errorf("%s: %w", cs.name, err)
			}
		}
		if err := callgrind("-d", srv.Process.Pid); err != nil {
			return err
		}
		ir, err := lastDump(dir, srv.Process.Pid)
		if err != nil {
			return err
		}
		fmt.Printf("%-62s %8d instructions per call\n", cs.name, ir/int64(n))
	}
	return nil
}

// callgrind runs callgrind_control with flag (-z zeroes, -d dumps) on pid.
func callgrind(flag string, pid int) error {
	out, err := exec.Command("callgrind_control", flag, strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control %s: %w: %s", flag, err, out)
	}
	return nil
}

// lastDump returns the instructions of pid's newest callgrind dump in dir
// (cg.<pid>.<n> with the largest n; its "summary:" or "totals:" line).
func lastDump(dir string, pid int) (int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("cg.%d.*", pid)))
	if err != nil {
		return 0, err
	}
	newest, last := "", -1
	for _, f := range files {
		if k, err := strconv.Atoi(f[strings.LastIndexByte(f, '.')+1:]); err == nil && k > last {
			newest, last = f, k
		}
	}
	if newest == "" {
		return 0, fmt.Errorf("no callgrind dump of %d in %s", pid, dir)
	}
	f, err := os.Open(newest)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "totals: "); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no summary line", newest)
}

// freePort returns a loopback port no one listens on.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
