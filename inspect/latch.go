package inspect

import (
	"context"
	"fmt"
	"io"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/internal/values"
)

// This file is the latches' home in inspect (see kind): reported as
// KindLatch, read as LatchState.

func init() { register("latches", latchKind{}) }

type latchKind struct{}

func (latchKind) names() []string { return []string{KindLatch} }

func (latchKind) name(spec.Obj) string { return KindLatch }

func (latchKind) read(ctx context.Context, in *Inspector, pipe redis.Pipeliner, f *found, inst *Instance) reader {
	st := &LatchState{Count: f.obj.obj.(*spec.Latch).Count, TTLMs: -2}
	inst.Latch = st
	v := pipe.Get(ctx, f.key)
	ttl := pipe.PTTL(ctx, f.key)
	return done(func(int64) {
		if n, err := values.LatchCount(v.Val()); err == nil && v.Err() == nil {
			st.Set, st.Count, st.TTLMs = true, n, ttlMs(ttl.Val())
		}
		st.Open = st.Count <= 0
	})
}

func (latchKind) total(t *Totals, inst *Instance) {
	if inst.Latch != nil && inst.Latch.Open {
		t.Open++
	}
}

func (latchKind) summary(o *ObjectState) string {
	open := 0
	for _, i := range o.Instances {
		if i.Latch != nil && i.Latch.Open {
			open++
		}
	}
	return fmt.Sprintf("%d open", open)
}

func (latchKind) brief(o *ObjectState) string { return fmt.Sprintf("%d open", o.Open) }

func (latchKind) state(inst *Instance) string {
	l := inst.Latch
	switch {
	case l == nil:
		return ""
	case l.Open:
		return "open"
	case !l.Set:
		return fmt.Sprintf("not set (count %d)", l.Count)
	}
	return fmt.Sprintf("count %d, expires in %s", l.Count, ms(l.TTLMs))
}

func (latchKind) details(io.Writer, *Instance) {}

func (latchKind) gauges(o *ObjectState) []Gauge {
	return []Gauge{{Name: "lockgen_latches_open", Help: "Latches counted down to zero.", Value: float64(o.Open)}}
}

func (latchKind) view(inst *Instance) View {
	l := inst.Latch
	switch {
	case l == nil:
		return View{}
	case l.Open:
		return View{State: "open"}
	case !l.Set:
		return View{State: fmt.Sprintf("not set (count %d)", l.Count)}
	}
	return View{State: fmt.Sprintf("count %d, expires in %s", l.Count, msText(l.TTLMs))}
}

// waitsFor: none; a latch has no holders.
func (latchKind) waitsFor(*Instance) ([]Holder, []Waiter) { return nil, nil }
