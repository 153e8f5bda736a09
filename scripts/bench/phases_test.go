package bench

import (
	"context"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// phaseHook is a go-redis hook that records when each command enters and
// leaves the client's Process (the round trip, with go-redis' own work).
type phaseHook struct{ stamps []time.Time }

func (h *phaseHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *phaseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.stamps = append(h.stamps, time.Now())
		err := next(ctx, cmd)
		h.stamps = append(h.stamps, time.Now())
		return err
	}
}

func (h *phaseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// BenchmarkUncontendedPhases splits an uncontended Lock+Unlock into its
// five phases, per library: before the first call (the library's own
// work: the key, the lock object, the owner), the acquire's round trip,
// between the calls (the lease and its bookkeeping, the unlock's start),
// the release's round trip, and after it. The libraries run interleaved
// operation by operation in random order, as in
// BenchmarkUncontendedInterleaved, and each phase reports its median over
// every operation (µs): where a library's time goes, the client's own
// work apart from the round trips. lockgen-calls is the runtime's two
// calls sent without it. Run it with -benchtime 20000x (that many
// operations of each):
//
//	go test -run '^$' -bench UncontendedPhases -benchtime 20000x
func BenchmarkUncontendedPhases(b *testing.B) {
	type entry struct {
		name   string
		op     func(int) error
		hook   *phaseHook
		phases [5][]float64
	}
	var libs []*entry
	for _, lib := range []lib{lockgenReentrant, lockgenSimple, redislockDefault} {
		rdb, h := newRedis(b), &phaseHook{}
		rdb.AddHook(h)
		libs = append(libs, &entry{name: lib.name, op: uncontended(b, lib, rdb), hook: h})
	}
	rdb, h := newRedis(b), &phaseHook{}
	rdb.AddHook(h)
	libs = append(libs, &entry{name: "lockgen-calls", op: uncontendedCalls(b, rdb), hook: h})
	n := 0
	for b.Loop() {
		rand.Shuffle(len(libs), func(x, y int) { libs[x], libs[y] = libs[y], libs[x] })
		for _, e := range libs {
			e.hook.stamps = e.hook.stamps[:0]
			start := time.Now()
			if err := e.op(n); err != nil {
				b.Fatal(err)
			}
			end := time.Now()
			n++
			s := e.hook.stamps
			if len(s) != 4 {
				b.Fatalf("%s: %d commands in a Lock+Unlock, want 2", e.name, len(s)/2)
			}
			at := [6]time.Time{start, s[0], s[1], s[2], s[3], end}
			for p := range e.phases {
				e.phases[p] = append(e.phases[p], float64(at[p+1].Sub(at[p]))/float64(time.Microsecond))
			}
		}
	}
	names := [5]string{"before", "acquire", "between", "release", "after"}
	for _, e := range libs {
		own := 0.0
		for p, name := range names {
			m := median(e.phases[p])
			b.ReportMetric(m, e.name+"-"+name+"-µs")
			if p%2 == 0 {
				own += m
			}
		}
		b.ReportMetric(own, e.name+"-own-µs")
	}
}
