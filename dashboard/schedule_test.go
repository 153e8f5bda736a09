package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/dashboard"
	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestScheduleView: the dashboard shows a schedule as it shows every kind,
// from inspect's view (its last tick, the client that fired it, its next
// tick) and gauges (/metrics).
func TestScheduleView(t *testing.T) {
	rdb := redistest.Single(t).Client()
	in, err := inspect.Parse(rdb, "jobs.yaml", []byte("version: 1\npackage: jobs\nnamespace: jobs\nschedules:\n  Tick: { every: 100ms }\n"), inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	srv := httptest.NewServer(dashboard.New(in, dashboard.Options{}))
	defer srv.Close()
	c := runtime.New(rdb, runtime.WithID("replica-7"))
	defer c.Close()
	def := &lockimpl.ScheduleDef{Name: "Tick", ID: "Tick", Every: 100 * time.Millisecond, Scripts: lockimpl.Scripts().Schedules()}
	s := lockimpl.NewSchedule(c, def, "jobs:{Tick:}")
	if err := s.Start(func(context.Context, runtime.Tick) error { return nil }); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var l struct {
		Instances []struct{ View inspect.View } `json:"instances"`
	}
	if !redistest.Within(30*time.Second, func() bool {
		get(t, srv.URL+"/api/objects/Tick", &l)
		return len(l.Instances) == 1 && strings.Contains(l.Instances[0].View.State, "fired by replica-7")
	}) {
		t.Fatalf("Tick's view: %+v", l.Instances)
	}
	r, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if !strings.Contains(string(b), "lockgen_schedule_fires") {
		t.Errorf("/metrics has no lockgen_schedule_fires:\n%s", b)
	}
}
