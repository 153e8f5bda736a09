package inspect

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

const scheduleSpec = `version: 1
package: jobs
namespace: jobs
queues:
  Reports: { key: "reports", payload: string, codec: string }
schedules:
  Tick: { every: 100ms }
  Report: { every: 100ms, queue: Reports, catchUp: all }
  Idle: { cron: "0 3 * * *", timezone: Europe/Paris }
`

// TestScheduleState: a snapshot shows every schedule, fired or not (one
// targeting a queue keeps its state under the queue's hash tag), with
// its last tick, the client that fired it and its next tick; SetPaused
// pauses and resumes it, and the snapshot says so.
func TestScheduleState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Single(t).Client()
	in, err := Parse(rdb, "jobs.yaml", []byte(scheduleSpec), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	c := runtime.New(rdb, runtime.WithID("replica-1"))
	defer c.Close()
	tick := in.byNm["Tick"].obj.(*spec.Schedule)
	report := in.byNm["Report"].obj.(*spec.Schedule)
	hs := lockimpl.NewSchedule(c, defs.Schedule(tick), defs.ScheduleKey("jobs", tick))
	qk := defs.Key("jobs", report.Target.Object)
	q := lockimpl.NewQueue(c, defs.Queue(report.Target), runtime.String{}, qk.Key())
	qs := lockimpl.NewQueueSchedule(c, defs.Schedule(report), q)
	if err := hs.Start(func(context.Context, runtime.Tick) error { return nil }); err != nil {
		t.Fatal(err)
	}
	defer hs.Stop()
	if err := qs.Start(func(context.Context, runtime.Tick) (string, error) { return "r", nil }); err != nil {
		t.Fatal(err)
	}
	defer qs.Stop()
	states := func() map[string]*Instance {
		t.Helper()
		snap, err := in.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*Instance{}
		for _, o := range snap.Objects {
			if o.Kind == KindSchedule {
				if len(o.Instances) != 1 {
					t.Fatalf("schedule %s: %d instances", o.Name, len(o.Instances))
				}
				out[o.Name] = o.Instances[0]
			}
		}
		return out
	}
	if !redistest.Within(30*time.Second, func() bool {
		st := states()
		return st["Tick"].Schedule.Fires > 0 && st["Report"].Schedule.Fires > 0
	}) {
		st := states()
		t.Fatalf("no fires: %+v %+v", st["Tick"].Schedule, st["Report"].Schedule)
	}
	st := states()
	if r := st["Report"]; r.Key != "jobs:{Reports:reports}:schedule:Report" || r.Schedule.LastBy != "replica-1" || r.Schedule.Target != "Reports" {
		t.Errorf("Report: key %s, state %+v", r.Key, r.Schedule)
	}
	idle := st["Idle"].Schedule
	if idle.Fires != 0 || idle.NextMs <= idle.NowMs || !strings.Contains(State(st["Idle"]), "never fired") {
		t.Errorf("Idle: %+v, %q", idle, State(st["Idle"]))
	}
	if err := in.SetPaused(ctx, true, "Tick"); err != nil {
		t.Fatal(err)
	}
	if s := State(states()["Tick"]); !strings.Contains(s, "paused") || !strings.Contains(s, "fired by replica-1") {
		t.Errorf("after SetPaused: %q", s)
	}
	if err := in.SetPaused(ctx, false, "Tick"); err != nil {
		t.Fatal(err)
	}
	if states()["Tick"].Schedule.Paused {
		t.Error("still paused after SetPaused(false)")
	}
	if err := in.SetPaused(ctx, true, "Reports"); err == nil {
		t.Error("SetPaused of a queue succeeded")
	}
}
