package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := workerMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "torture worker:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "check" {
		if err := checkMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "torture check:", err)
			os.Exit(1)
		}
		return
	}
	if err := runMain(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "torture:", err)
		os.Exit(1)
	}
}

// allFaults is the long mode's schedule: every kind once per round.
// A stopped holder catches its lease's timer before its next check only
// some of the time, so it comes twice.
var allFaults = []string{
	"sigstop-holder", "kill-holder", "kill-consumer", "client-kill-normal", "client-kill-pubsub",
	"sigstop-holder", "client-pause", "proxy-cut", "lose-reply", "lose-replies", "proxy-delay", "partition-holder", "redis-restart",
}

func runMain(args []string) error {
	fs := flag.NewFlagSet("torture", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: torture [flags]            run workers, inject faults, print the table
       torture check -log events.jsonl  print the table of an earlier run
       torture worker ...               (a worker process; the harness starts these)

faults: %s

`, strings.Join(faultNames(), ", "))
		fs.PrintDefaults()
	}
	workers := fs.Int("n", 8, "worker processes")
	rounds := fs.Int("rounds", 2, "times the fault schedule runs")
	faults := fs.String("faults", strings.Join(allFaults, ","), "the fault schedule, comma-separated")
	settle := fs.Duration("settle", 5*time.Second, "time after each fault heals before the next")
	warmup := fs.Duration("warmup", 3*time.Second, "time before the first fault")
	cluster := fs.Bool("cluster", false, "a 3-primary cluster instead of one node (proxy faults are skipped)")
	loseRate := fs.Float64("lose-reply", 0.05, "lose-replies: the fraction of EVAL/EVALSHA requests whose reply the proxies lose after Redis ran them")
	loseFor := fs.Duration("lose-for", 20*time.Second, "how long a lose-replies fault lasts")
	dir := fs.String("dir", "", "where events.jsonl and workers.log go (default: a new temporary directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := Config{
		Workers: *workers, Rounds: *rounds, Faults: strings.Split(*faults, ","),
		Settle: *settle, Warmup: *warmup, Cluster: *cluster, Dir: *dir, Log: os.Stderr,
		LoseRate: *loseRate, LoseFor: *loseFor,
		Worker: func(args ...string) *exec.Cmd { return exec.Command(exe, append([]string{"worker"}, args...)...) },
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	events, err := Run(ctx, cfg)
	if len(events) == 0 {
		return err
	}
	// Interrupted (err != nil): the table of what ran so far.
	fmt.Printf("%s, %s/%s, %d CPUs, %s, commit %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"),
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), redisVersion(cfg.Cluster), gitHead())
	Check(events).Print(os.Stdout)
	return err
}

// redisVersion is redis-server's version line, for the table's header.
func redisVersion(cluster bool) string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server ?"
	}
	v := strings.Fields(string(out))
	mode := "single node"
	if cluster {
		mode = "3-primary cluster"
	}
	if len(v) >= 3 {
		return "Redis " + strings.TrimPrefix(v[2], "v=") + " (" + mode + ")"
	}
	return "Redis ? (" + mode + ")"
}

// gitHead is the commit the harness ran on, when run inside the repository.
func gitHead() string {
	out, err := exec.Command("git", "log", "-1", "--format=%h %s").Output()
	if err != nil {
		return "?"
	}
	line := strings.TrimSpace(string(out))
	if len(line) > 60 {
		line = line[:60] + "…"
	}
	return line
}

func checkMain(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("log", "events.jsonl", "the events of a run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	var events []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return err
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	Check(events).Print(os.Stdout)
	return nil
}
