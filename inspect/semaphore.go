package inspect

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
)

// This file is the semaphores' home in inspect (see kind): reported as
// KindSemaphore, read as SemaphoreState.

func init() { register("semaphores", semaphoreKind{}) }

type semaphoreKind struct{}

func (semaphoreKind) names() []string { return []string{KindSemaphore} }

func (semaphoreKind) name(spec.Obj) string { return KindSemaphore }

func (semaphoreKind) read(ctx context.Context, in *Inspector, pipe redis.Pipeliner, f *found, inst *Instance) reader {
	key := f.key
	st := &SemaphoreState{}
	inst.Semaphore = st
	holds := pipe.ZRangeWithScores(ctx, key, 0, maxZset-1)
	counts := pipe.HGetAll(ctx, keys.Sub(key, "counts"))
	countsTTL := pipe.PTTL(ctx, keys.Sub(key, "counts"))
	capacity := pipe.Get(ctx, keys.Sub(key, "capacity"))
	permits := f.obj.obj.(*spec.Semaphore).Permits
	waiters := in.readWaiters(ctx, pipe, key)
	max := in.opts.MaxItems
	return done(func(nowMs int64) {
		st.Waiters = waiters(nowMs)
		st.Capacity = permits
		// "<capacity>[e][ <op>,...]" (see semaphore_capacity; e: it expires)
		c, _, _ := strings.Cut(capacity.Val(), " ")
		c = strings.TrimSuffix(c, "e")
		if c, err := strconv.Atoi(c); err == nil && capacity.Err() == nil {
			st.Capacity, st.CapacitySet = c, true
		}
		cs := counts.Val()
		zs := holds.Val()
		if o, ok := cs["s"]; ok && len(zs) == 0 && countsTTL.Val() > 0 {
			// The compact single hold (semaphore_acquire's fast path): the
			// counts alone, living as long as the hold.
			zs = []redis.Z{{Member: o, Score: float64(nowMs + countsTTL.Val().Milliseconds())}}
		}
		for _, z := range zs {
			if int64(z.Score) <= nowMs {
				continue // ran out; evicted by the next script run
			}
			owner := z.Member.(string)
			n, _ := strconv.Atoi(cs[owner])
			st.Held += n
			if len(st.Holders) < max {
				hd := holder(owner)
				hd.Permits, hd.TTLMs = n, int64(z.Score)-nowMs
				st.Holders = append(st.Holders, hd)
			}
		}
		st.Free = max0(st.Capacity - st.Held)
	})
}

func (semaphoreKind) total(t *Totals, inst *Instance) {
	s := inst.Semaphore
	if s == nil {
		return
	}
	t.Waiters += len(s.Waiters)
	t.Held += s.Held
	t.Holders += len(s.Holders)
	t.Capacity += s.Capacity
}

func (semaphoreKind) summary(o *ObjectState) string {
	return fmt.Sprintf("%d/%d permits in use", o.Held, o.Capacity)
}

func (k semaphoreKind) brief(o *ObjectState) string { return k.summary(o) }

func (semaphoreKind) state(inst *Instance) string {
	s := inst.Semaphore
	if s == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d permits in use, %d free, %d holders", s.Held, s.Capacity, s.Free, len(s.Holders))
}

func (semaphoreKind) details(w io.Writer, inst *Instance) {
	if inst.Semaphore == nil {
		return
	}
	writeHolders(w, inst.Semaphore.Holders)
	writeWaiters(w, inst.Semaphore.Waiters)
}

func (semaphoreKind) gauges(o *ObjectState) []Gauge {
	return []Gauge{
		{Name: "lockgen_semaphore_permits_in_use", Help: "Permits held, summed over a semaphore's instances.", Value: float64(o.Held)},
		{Name: "lockgen_semaphore_permits", Help: "Capacity, summed over a semaphore's instances.", Value: float64(o.Capacity)},
		waitersGauge(o),
	}
}

func (semaphoreKind) view(inst *Instance) View {
	s := inst.Semaphore
	if s == nil {
		return View{}
	}
	v := View{State: fmt.Sprintf("%d/%d permits in use, %d free", s.Held, s.Capacity, s.Free), Details: waiterLines(s.Waiters)}
	for _, h := range s.Holders {
		v.Details = append(v.Details, "holder: "+holderText(h))
	}
	n := s.Capacity
	v.Actions = []Offer{{Action: "set-permits", Label: "Set permits", Question: "Set the permits of " + inst.Key + " to", N: &n}}
	return v
}

// waitsFor: none; a semaphore's waiter waits for any one of its holders,
// not all, so semaphores stay out of the wait-for graph.
func (semaphoreKind) waitsFor(*Instance) ([]Holder, []Waiter) { return nil, nil }
