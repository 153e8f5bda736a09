// Package asynq26 runs lockgen beside asynq v0.26, the newest: its
// schedules beside asynq's Scheduler and PeriodicTaskManager, eight
// instances each, as eight replicas of a service would start them (issue
// 28; make compare-schedules), and its worker beside asynq's server
// (BenchmarkWorker; make bench-worker). It is a module of its own:
// scripts/bench pins asynq v0.19.0, whose x/rate semaphore its semaphore
// benchmarks use and which asynq's later versions cannot load, and v0.19
// has no PeriodicTaskManager.
package asynq26

import (
	"context"
	"log"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

var node *redistest.Node

func TestMain(m *testing.M) {
	var err error
	if node, err = redistest.Start(); err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	node.Close()
	os.Exit(code)
}

// windowEnv sets TestSchedulersSideBySide's window (a Go duration;
// default 10s).
const windowEnv = "LOCKGEN_SCHEDULER_WINDOW"

// provider is a PeriodicTaskConfigProvider of one task every second.
type provider struct{}

func (provider) GetConfigs() ([]*asynq.PeriodicTaskConfig, error) {
	return []*asynq.PeriodicTaskConfig{{Cronspec: "@every 1s", Task: asynq.NewTask("tick", nil), Opts: []asynq.Option{asynq.Queue("managed")}}}, nil
}

// TestSchedulersSideBySide: eight instances each of asynq's Scheduler
// (each registers "@every 1s"), asynq's PeriodicTaskManager (each syncs
// the same one-task config) and lockgen's schedule (every: 1s, a handler
// that records its tick) run for the window on one Redis; it counts what
// reached Redis per tick. asynq enqueues once per instance and tick;
// lockgen fires once per tick whatever the number of instances.
func TestSchedulersSideBySide(t *testing.T) {
	window := 10 * time.Second
	if v := os.Getenv(windowEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		window = d
	}
	const replicas = 8
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	opt := asynq.RedisClientOpt{Addr: node.Addr}
	var stops []func()
	for range replicas {
		s := asynq.NewScheduler(opt, &asynq.SchedulerOpts{LogLevel: asynq.FatalLevel})
		if _, err := s.Register("@every 1s", asynq.NewTask("tick", nil), asynq.Queue("scheduled")); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		stops = append(stops, s.Shutdown)
		m, err := asynq.NewPeriodicTaskManager(asynq.PeriodicTaskManagerOpts{
			RedisConnOpt: opt, PeriodicTaskConfigProvider: provider{}, SyncInterval: time.Minute,
			SchedulerOpts: &asynq.SchedulerOpts{LogLevel: asynq.FatalLevel},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		stops = append(stops, m.Shutdown)
	}
	def := &lockimpl.ScheduleDef{Name: "EverySecond", ID: "EverySecond", Every: time.Second, CatchUp: lockimpl.CatchUpLatest,
		Scripts: lockimpl.Scripts().Schedules()}
	kd := lockimpl.KeyDef{Namespace: "bench", Object: "EverySecond"}
	key := kd.Key()
	for range replicas {
		c := lockrt.New(redis.NewClient(&redis.Options{Addr: node.Addr}))
		s := lockimpl.NewSchedule(c, def, key)
		if err := s.Start(func(ctx context.Context, tk lockrt.Tick) error {
			return rdb.RPush(ctx, "lockgen:fires", tk.Time.UnixMilli()).Err()
		}); err != nil {
			t.Fatal(err)
		}
		stops = append(stops, func() { s.Stop(); c.Close() })
	}
	start := time.Now()
	time.Sleep(window) // the measured window: every instance runs on its own timer
	for _, stop := range stops {
		stop()
	}
	seconds := time.Since(start).Seconds()

	scheduled := rdb.LLen(ctx, "asynq:{scheduled}:pending").Val()
	managed := rdb.LLen(ctx, "asynq:{managed}:pending").Val()
	var ticks []int64
	for _, s := range rdb.LRange(ctx, "lockgen:fires", 0, -1).Val() {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
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
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("%d instances each, %.1fs: asynq Scheduler %d tasks (%.2f per tick), PeriodicTaskManager %d tasks (%.2f per tick); lockgen %d fires (%.2f per tick), %d duplicates, %d missed; load %s",
		replicas, seconds, scheduled, float64(scheduled)/seconds, managed, float64(managed)/seconds,
		len(ticks), float64(len(ticks))/seconds, dups, missed, load)
	if dups > 0 || missed > 0 {
		t.Errorf("lockgen: %d duplicates, %d missed ticks", dups, missed)
	}
	if want := int(seconds); len(ticks) < want-1 || len(ticks) > want+1 {
		t.Errorf("lockgen fired %d ticks in %.1fs", len(ticks), seconds)
	}
}
