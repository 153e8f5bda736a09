package inspect

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// This file is the limiters' home in inspect (see kind): reported as
// KindLimiter, read as LimiterState by their own script (readLater).

func init() { register("limiters", limiterKind{}) }

type limiterKind struct{}

func (limiterKind) names() []string { return []string{KindLimiter} }

func (limiterKind) name(spec.Obj) string { return KindLimiter }

// needsSuffixes: a per-client limiter's allowances are keys of their own.
func (limiterKind) needsSuffixes(obj spec.Obj) bool {
	return obj.(*spec.Limiter).Scope == spec.ScopePerClient
}

// read reads nothing: readLater does, after the pipeline.
func (limiterKind) read(context.Context, *Inspector, redis.Pipeliner, *found, *Instance) reader {
	return done(func(int64) {})
}

// readLater reads each allowance of a limiter by asking its script for
// zero requests, with a runtime client of the allowance's client id.
func (limiterKind) readLater(ctx context.Context, in *Inspector, f *found, inst *Instance) {
	l := f.obj.obj.(*spec.Limiter)
	def := defs.Limiter(l)
	st := &LimiterState{Algorithm: l.Algorithm, Scope: l.Scope, Capacity: def.Capacity()}
	inst.Limiter = st
	var clients []string
	if l.Scope == spec.ScopePerClient {
		for s := range f.suffixes {
			if c, ok := strings.CutPrefix(s, l.Algorithm+":"); ok {
				clients = append(clients, c)
			}
		}
		sort.Strings(clients)
		if len(clients) > in.opts.MaxItems {
			clients = clients[:in.opts.MaxItems]
		}
	} else {
		clients = []string{""}
	}
	cfg := in.rdb.Exists(ctx, keys.Sub(f.key, "cfg")).Val() == 1
	for _, c := range clients {
		r := LimiterReading{Client: c, Remaining: st.Capacity}
		if cfg {
			res, err := lockimpl.NewLimiter(in.runtimeClient(c), def, f.key).AllowN(ctx, 0)
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Remaining, r.ResetAfterMs = res.Remaining, res.ResetAfter.Milliseconds()
			}
		}
		st.Clients = append(st.Clients, r)
	}
}

func (limiterKind) total(t *Totals, inst *Instance) {
	if inst.Limiter == nil {
		return
	}
	for _, r := range inst.Limiter.Clients {
		if r.Remaining == 0 && r.Error == "" {
			t.Empty++
		}
	}
}

func (limiterKind) summary(o *ObjectState) string {
	low, capacity := -1, 0
	for _, i := range o.Instances {
		if i.Limiter == nil {
			continue
		}
		for _, r := range i.Limiter.Clients {
			if low < 0 || r.Remaining < low {
				low, capacity = r.Remaining, i.Limiter.Capacity
			}
		}
	}
	if low < 0 {
		return ""
	}
	return fmt.Sprintf("lowest allowance %d/%d", low, capacity)
}

func (limiterKind) brief(o *ObjectState) string { return fmt.Sprintf("%d exhausted", o.Empty) }

// clients says each allowance of inst in a line, with ms formatting
// milliseconds.
func (limiterKind) clients(inst *Instance, ms func(int64) string) string {
	if inst.Limiter == nil {
		return ""
	}
	var s []string
	for _, r := range inst.Limiter.Clients {
		x := fmt.Sprintf("%d/%d left, full in %s", r.Remaining, inst.Limiter.Capacity, ms(r.ResetAfterMs))
		if r.Client != "" {
			x = r.Client + ": " + x
		}
		if r.Error != "" {
			x += " (" + r.Error + ")"
		}
		s = append(s, x)
	}
	return strings.Join(s, "; ")
}

func (k limiterKind) state(inst *Instance) string { return k.clients(inst, ms) }

func (limiterKind) details(io.Writer, *Instance) {}

func (limiterKind) gauges(o *ObjectState) []Gauge {
	return []Gauge{{Name: "lockgen_limiter_exhausted", Help: "Limiter allowances with no request left.", Value: float64(o.Empty)}}
}

func (k limiterKind) view(inst *Instance) View { return View{State: k.clients(inst, msText)} }

// waitsFor: none; a limiter has no holders.
func (limiterKind) waitsFor(*Instance) ([]Holder, []Waiter) { return nil, nil }
