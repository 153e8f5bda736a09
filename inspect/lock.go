package inspect

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/internal/values"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// This file is the locks' home in inspect (see kind): reported by their
// lock kind, read as LockState.

func init() { register("locks", lockKind{}) }

type lockKind struct{}

func (lockKind) names() []string {
	var out []string
	for _, k := range spec.LockKinds {
		out = append(out, string(k))
	}
	return out
}

func (lockKind) name(obj spec.Obj) string { return string(obj.(*spec.Lock).Kind) }

func (lockKind) read(ctx context.Context, in *Inspector, pipe redis.Pipeliner, f *found, inst *Instance) reader {
	l, key := f.obj.obj.(*spec.Lock), f.key
	st := &LockState{}
	inst.Lock = st
	switch l.Kind {
	case spec.Fair:
		h := pipe.HGetAll(ctx, key)
		ttl := pipe.PTTL(ctx, key)
		waiters := in.readWaiters(ctx, pipe, key)
		return done(func(nowMs int64) {
			for owner, n := range h.Val() {
				if owner == "s" {
					continue // the fast path's mark (see fair_acquire), not a holder
				}
				hd := holder(owner)
				c, _, _ := strings.Cut(n, " ") // "<holds>[ <op>,...]"
				hd.Holds, _ = strconv.Atoi(c)
				hd.TTLMs = ttlMs(ttl.Val())
				st.Holders = append(st.Holders, hd)
			}
			st.Waiters = waiters(nowMs)
			st.Held = len(st.Holders) > 0
		})
	case spec.ReadWrite:
		h := pipe.HGetAll(ctx, key)
		dl := pipe.ZRangeWithScores(ctx, keys.Sub(key, "holds"), 0, maxZset-1)
		ttl := pipe.PTTL(ctx, key)
		waiters := in.readWaiters(ctx, pipe, key)
		return done(func(nowMs int64) {
			st.Waiters = waiters(nowMs)
			deadlines := map[string]int64{}
			for _, z := range dl.Val() {
				deadlines[z.Member.(string)] = int64(z.Score)
			}
			fields := h.Val()
			if m, ok := fields["s"]; ok && len(deadlines) == 0 && ttl.Val() > 0 {
				// A compact single hold (rw_acquire's fast path): no holds
				// key, the hold lives as long as the lock's hash.
				deadlines[m] = nowMs + ttl.Val().Milliseconds()
			}
			if w, ok := fields["writer"]; ok {
				if d, ok := deadlines["w"]; ok && d > nowMs {
					hd := holder(w)
					hd.Side = "write"
					hd.Holds, _ = strconv.Atoi(fields["writes"])
					hd.TTLMs = d - nowMs
					st.Holders = append(st.Holders, hd)
				}
			}
			var readers []Holder
			for field, n := range fields {
				owner, ok := strings.CutPrefix(field, "r:")
				if !ok {
					continue
				}
				if d, ok := deadlines[field]; ok && d > nowMs {
					hd := holder(owner)
					hd.Side = "read"
					hd.Holds, _ = strconv.Atoi(n)
					hd.TTLMs = d - nowMs
					readers = append(readers, hd)
				}
			}
			sort.Slice(readers, func(i, j int) bool { return readers[i].Owner < readers[j].Owner })
			st.Holders = append(st.Holders, readers...)
			st.Held = len(st.Holders) > 0
		})
	default: // reentrant, fenced, simple, redlock, leader (a fenced lock: its holder leads, its token is the epoch)
		v := pipe.Get(ctx, key)
		ttl := pipe.PTTL(ctx, key)
		var fence *redis.StringCmd
		if l.Kind == spec.Fenced || l.Kind == spec.Leader {
			fence = pipe.Get(ctx, keys.Sub(key, "fence"))
		}
		kind := l.Kind
		waiters := in.readWaiters(ctx, pipe, key)
		return done(func(nowMs int64) {
			st.Waiters = waiters(nowMs)
			if fence != nil {
				st.LastToken, _ = fence.Int64()
			}
			val, err := v.Result()
			if err != nil {
				return
			}
			h, ok := values.ParseHold(val)
			if !ok {
				return
			}
			hd := holder(h.Owner)
			hd.Holds = 1
			if kind != spec.Simple && kind != spec.RedLock {
				hd.Holds, hd.Token = h.Holds, h.Token
			}
			hd.TTLMs = ttlMs(ttl.Val())
			st.Holders, st.Held = []Holder{hd}, true
		})
	}
}

func (lockKind) total(t *Totals, inst *Instance) {
	if inst.Lock == nil {
		return
	}
	if inst.Lock.Held {
		t.Held++
	}
	t.Holders += len(inst.Lock.Holders)
	t.Waiters += len(inst.Lock.Waiters)
}

func (lockKind) summary(o *ObjectState) string { return fmt.Sprintf("%d held", o.Held) }

func (lockKind) brief(o *ObjectState) string { return fmt.Sprintf("%d held", o.Held) }

func (lockKind) state(inst *Instance) string {
	l := inst.Lock
	if l == nil {
		return ""
	}
	if !l.Held {
		s := "free"
		if l.LastToken > 0 {
			s += fmt.Sprintf(" (last token %d)", l.LastToken)
		}
		return s
	}
	var hs []string
	for _, h := range l.Holders {
		s := h.Owner
		if h.Side != "" {
			s = h.Side + " " + s
		}
		if h.Holds > 1 {
			s += fmt.Sprintf(" x%d", h.Holds)
		}
		if h.Token > 0 {
			s += fmt.Sprintf(" token %d", h.Token)
		}
		hs = append(hs, s+", "+ms(h.TTLMs)+" left")
	}
	s := "held by " + strings.Join(hs, "; ")
	if len(l.Waiters) > 0 {
		s += fmt.Sprintf("; %d waiting", len(l.Waiters))
	}
	return s
}

func (lockKind) details(w io.Writer, inst *Instance) {
	if inst.Lock == nil {
		return
	}
	writeHolders(w, inst.Lock.Holders)
	writeWaiters(w, inst.Lock.Waiters)
}

func (lockKind) gauges(o *ObjectState) []Gauge {
	return []Gauge{
		{Name: "lockgen_locks_held", Help: "Instances of a lock that are held.", Value: float64(o.Held)},
		waitersGauge(o),
	}
}

func (lockKind) view(inst *Instance) View {
	l := inst.Lock
	if l == nil {
		return View{}
	}
	v := View{Details: waiterLines(l.Waiters)}
	if !l.Held {
		v.State, v.Class = "free", "free"
		if l.LastToken != 0 {
			v.State += fmt.Sprintf(" (last token %d)", l.LastToken)
		}
		return v
	}
	hs := make([]string, len(l.Holders))
	for i, h := range l.Holders {
		hs[i] = holderText(h)
	}
	v.State, v.Class = "held by "+strings.Join(hs, "; "), "held"
	v.Actions = []Offer{{Action: "force-unlock", Label: "Force unlock", Question: "Force-unlock " + inst.Key + "?"}}
	return v
}

// waitsFor: a lock's waiter waits for all of its holders.
func (lockKind) waitsFor(inst *Instance) ([]Holder, []Waiter) {
	if inst.Lock == nil {
		return nil, nil
	}
	return inst.Lock.Holders, inst.Lock.Waiters
}

// lockDef returns the runtime definition of a lock object (defs.Lock, as
// generated code has it); a redlock, forced open on the one deployment
// inspect reads, is a simple lock with the RedLock's scripts there.
func lockDef(l *spec.Lock) *lockimpl.LockDef {
	if l.Kind == spec.RedLock {
		r := defs.RedLock(l)
		return &lockimpl.LockDef{Name: r.Name, Kind: lockimpl.Simple, Lease: r.Lease, Renew: r.Renew, Wait: r.Wait, Scripts: r.Scripts}
	}
	return defs.Lock(l)
}
