package inspect

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// This file is the schedules' home in inspect (see kind): reported as
// KindSchedule, read as ScheduleState. A schedule has one instance; its
// state hash is its own key, or for a queue target under the queue's
// hash tag (defs.ScheduleKey), which the instance's Key names.

// KindSchedule is the kind inspect reports for schedules.
const KindSchedule = "schedule"

func init() { register("schedules", scheduleKind{}) }

// ScheduleState is a schedule's state: paused, its last fire (the tick,
// when it was fired and by which client id) and its next tick. Times are
// unix milliseconds; zero when none.
type ScheduleState struct {
	When   string `json:"when"`            // the spec's cron or every
	Target string `json:"queue,omitempty"` // the target queue, if any
	Paused bool   `json:"paused"`
	LastMs int64  `json:"lastMs,omitempty"`
	// LastAtMs is when the last tick was fired, by the server's clock.
	LastAtMs int64  `json:"lastAtMs,omitempty"`
	LastBy   string `json:"lastBy,omitempty"`
	Fires    int64  `json:"fires"`
	// NextMs is the next tick after the server's time.
	NextMs int64 `json:"nextMs"`
	// NowMs is the server's time when it was read.
	NowMs int64 `json:"nowMs"`
}

type scheduleKind struct{}

func (scheduleKind) names() []string { return []string{KindSchedule} }

func (scheduleKind) name(spec.Obj) string { return KindSchedule }

// runtimeSchedule is the runtime's schedule of s (for its timetable and
// Pause), over the inspector's client.
func (in *Inspector) runtimeSchedule(s *spec.Schedule) *runtime.Schedule {
	return lockimpl.NewSchedule(in.runtimeClient(""), defs.Schedule(s), defs.ScheduleKey(in.spec.Namespace, s))
}

func (scheduleKind) read(ctx context.Context, in *Inspector, pipe redis.Pipeliner, f *found, inst *Instance) reader {
	s := f.obj.obj.(*spec.Schedule)
	inst.Key = defs.ScheduleKey(in.spec.Namespace, s)
	st := &ScheduleState{When: s.Cron, Target: s.Queue}
	if s.Cron == "" {
		st.When = "every " + spec.DurationString(s.Every)
	}
	inst.Schedule = st
	h := pipe.HGetAll(ctx, inst.Key)
	return done(func(nowMs int64) {
		rs := runtime.ScheduleStateOf(h.Val())
		st.Paused, st.LastBy, st.Fires, st.NowMs = rs.Paused, rs.LastBy, rs.Fires, nowMs
		if !rs.Last.IsZero() {
			st.LastMs, st.LastAtMs = rs.Last.UnixMilli(), rs.LastAt.UnixMilli()
		}
		if n := in.runtimeSchedule(s).Next(time.UnixMilli(nowMs)); !n.IsZero() {
			st.NextMs = n.UnixMilli()
		}
	})
}

func (scheduleKind) total(t *Totals, inst *Instance) {
	if inst.Schedule != nil && inst.Schedule.Paused {
		t.Paused++
	}
}

func (k scheduleKind) summary(o *ObjectState) string {
	if len(o.Instances) == 1 {
		return k.state(o.Instances[0])
	}
	return ""
}

func (scheduleKind) brief(o *ObjectState) string {
	if o.Paused > 0 {
		return "paused"
	}
	return ""
}

func (scheduleKind) state(inst *Instance) string {
	s := inst.Schedule
	if s == nil {
		return ""
	}
	text := s.When
	if s.Target != "" {
		text += " to queue " + s.Target
	}
	if s.Paused {
		text += ", paused"
	}
	if s.LastMs != 0 {
		text += fmt.Sprintf(", last %s (fired by %s, %s ago)", stamp(s.LastMs), s.LastBy, ms(s.NowMs-s.LastAtMs))
	} else {
		text += ", never fired"
	}
	if s.NextMs != 0 {
		text += fmt.Sprintf(", next %s (in %s)", stamp(s.NextMs), ms(s.NextMs-s.NowMs))
	}
	return text + fmt.Sprintf(", %d fires", s.Fires)
}

// stamp formats unix ms as a UTC time.
func stamp(v int64) string { return time.UnixMilli(v).UTC().Format("2006-01-02 15:04:05.000Z") }

func (scheduleKind) details(io.Writer, *Instance) {}

func (scheduleKind) gauges(o *ObjectState) []Gauge {
	var g []Gauge
	for _, inst := range o.Instances {
		s := inst.Schedule
		if s == nil {
			continue
		}
		paused := 0.0
		if s.Paused {
			paused = 1
		}
		g = append(g,
			Gauge{Name: "lockgen_schedule_fires", Help: "Ticks a schedule fired, on any replica.", Value: float64(s.Fires)},
			Gauge{Name: "lockgen_schedule_paused", Help: "1 while a schedule is paused.", Value: paused},
			Gauge{Name: "lockgen_schedule_last_fire_seconds", Help: "The last tick a schedule fired (unix seconds; 0: none).", Value: float64(s.LastMs) / 1000})
	}
	return g
}

// view shows the state, and offers pause or resume (the dashboard's
// "pause" and "resume" actions, which a queue instance offers too).
func (k scheduleKind) view(inst *Instance) View {
	if inst.Schedule == nil {
		return View{}
	}
	v := View{State: k.state(inst)}
	if inst.Schedule.Paused {
		v.Class = "held"
		v.Actions = append(v.Actions, Offer{Action: "resume", Label: "Resume", Question: "Resume schedule " + inst.Object + " on every replica?"})
	} else {
		v.Actions = append(v.Actions, Offer{Action: "pause", Label: "Pause", Question: "Pause schedule " + inst.Object + " on every replica (its ticks are skipped)?"})
	}
	return v
}

// waitsFor: none; a schedule has no holders.
func (scheduleKind) waitsFor(*Instance) ([]Holder, []Waiter) { return nil, nil }

// SetPaused pauses (paused true) or resumes a schedule on every replica,
// through the runtime's Pause and Resume: a paused schedule's ticks are
// skipped until it is resumed. It returns ErrUnknownObject,
// ErrUnsupported for an object that is not a schedule, or a Redis error.
func (in *Inspector) SetPaused(ctx context.Context, paused bool, object string) error {
	o, err := in.object(object)
	if err != nil {
		return err
	}
	s, ok := o.obj.(*spec.Schedule)
	if !ok {
		return fmt.Errorf("%w: pause of %s, a %s", ErrUnsupported, o.name, o.kind)
	}
	rs := in.runtimeSchedule(s)
	if paused {
		return rs.Pause(ctx)
	}
	return rs.Resume(ctx)
}
