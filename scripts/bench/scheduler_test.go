package bench

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchqueues"
)

// schedulerWindowEnv sets TestSchedulerSideBySide's window (a Go
// duration; default 10s).
const schedulerWindowEnv = "LOCKGEN_SCHEDULER_WINDOW"

// TestSchedulerSideBySide runs eight instances of a once-a-second
// schedule, as eight replicas of a service would, for the window: asynq's
// Scheduler (each instance registers "@every 1s" and enqueues a task per
// tick into its queue) and lockgen's schedule (each instance a client
// that starts benchqueues' EverySecond, whose ticks offer an item to the
// Ticks queue). It counts what reached Redis: asynq's tasks, and
// lockgen's items, with their ticks checked (each once, none missed).
// The numbers go to scripts/bench/README.md.
func TestSchedulerSideBySide(t *testing.T) {
	window := 10 * time.Second
	if v := os.Getenv(schedulerWindowEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		window = d
	}
	const replicas = 8
	flush(t)
	ctx := context.Background()
	rdb := newRedis(t)

	// asynq: 8 Schedulers, one task each per tick.
	opt := asynq.RedisClientOpt{Addr: node.Addr}
	var scheds []*asynq.Scheduler
	for range replicas {
		s := asynq.NewScheduler(opt, &asynq.SchedulerOpts{LogLevel: asynq.FatalLevel})
		if _, err := s.Register("@every 1s", asynq.NewTask("tick", nil), asynq.Queue("ticks")); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	// lockgen: 8 clients start the schedule.
	var clients []*lockrt.Client
	for range replicas {
		c := lockrt.New(newRedis(t))
		clients = append(clients, c)
		s := benchqueues.NewSchedules(c).EverySecond()
		if err := s.Start(func(_ context.Context, tk lockrt.Tick) (string, error) {
			return strconv.FormatInt(tk.Time.UnixMilli(), 10), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	time.Sleep(window) // the measured window: both run on their own timers
	for _, s := range scheds {
		s.Shutdown()
	}
	for _, c := range clients {
		c.Close()
	}
	elapsed := time.Since(start)

	asynqTasks, err := rdb.LLen(ctx, "asynq:{ticks}:pending").Result()
	if err != nil {
		t.Fatal(err)
	}
	items, err := rdb.LRange(ctx, benchqueues.NewQueues(lockrt.New(rdb)).Ticks().Key(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ticks []int64
	for _, it := range items {
		n, err := strconv.ParseInt(it[3:], 10, 64) // after the envelope's header
		if err != nil {
			t.Fatalf("item %q", it)
		}
		ticks = append(ticks, n)
	}
	slices.Sort(ticks)
	dups, missed := 0, 0
	for i := 1; i < len(ticks); i++ {
		switch d := ticks[i] - ticks[i-1]; {
		case d == 0:
			dups++
		case d > 1000:
			missed += int(d/1000) - 1
		}
	}
	seconds := elapsed.Seconds()
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("%d instances, %.1fs: asynq Scheduler %d tasks (%.2f per second); lockgen %d fires (%.2f per second), %d duplicates, %d missed; load %s",
		replicas, seconds, asynqTasks, float64(asynqTasks)/seconds, len(ticks), float64(len(ticks))/seconds, dups, missed, load)
	if dups > 0 || missed > 0 {
		t.Errorf("lockgen: %d duplicates, %d missed ticks", dups, missed)
	}
	if want := int(seconds); len(ticks) < want-1 || len(ticks) > want+1 {
		t.Errorf("lockgen fired %d ticks in %.1fs", len(ticks), seconds)
	}
}
