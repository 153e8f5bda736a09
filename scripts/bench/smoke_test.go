package bench

import (
	"testing"
	"time"
)

// uncontendedArgs is the most arguments (the command's name and the
// script's SHA included) lockgen's uncontended Lock+Unlock may send: the
// acquire with the lock's and its registry's keys, lease and owner (8;
// the registry TTL is left out when it is the scripts' default), and the
// release of a hold the fast path took with the lock's key and owner (5;
// the lease travels only for a reentrant lock the watchdog does not
// renew). It was 15 before the third session of 2026-11-26 (registry TTL
// and lease on every call), and 22 before the flags went and the fast
// release came (the registry's keys, the wake-up prefix, the publish
// command and the hand-off lease on every release); bsm/redislock sends
// 12.
const uncontendedArgs = 13

// TestUncontended runs each library's BenchmarkUncontended operation a few
// times, and checks that lockgen's takes two round trips, at most 5
// Redis commands (scripts' included), none of them a PUBLISH or SPUBLISH
// (issue 11: no publish when nobody waits), and at most uncontendedArgs
// arguments.
func TestUncontended(t *testing.T) {
	const n = 20
	for _, lib := range uncontendedLibs {
		t.Run(lib.name, func(t *testing.T) {
			rdb := newRedis(t)
			hook := &roundTrips{}
			rdb.AddHook(hook)
			op := uncontended(t, lib, rdb)
			if err := op(n); err != nil { // the connection's handshake is not counted
				t.Fatal(err)
			}
			count := commandCounter(t)
			hook.trips.Store(0)
			hook.args.Store(0)
			stats0 := commandStats(t)
			before := count()
			for i := range n {
				if err := op(i); err != nil {
					t.Fatal(err)
				}
			}
			cmds := float64(count()-before-1) / n
			stats1 := commandStats(t)
			pubs := stats1["publish"] - stats0["publish"] + stats1["spublish"] - stats0["spublish"]
			trips := float64(hook.trips.Load()) / n
			args := float64(hook.args.Load()) / n
			t.Logf("%s per Lock+Unlock: %.1f round trips sending %.1f arguments, %.1f commands run by Redis (in scripts too); %d publishes in %d", lib.name, trips, args, cmds, pubs, n)
			if lib.name == lockgenReentrant.name || lib.name == lockgenSimple.name {
				if trips != 2 {
					t.Errorf("%.2f round trips per uncontended Lock+Unlock, want 2", trips)
				}
				if args > uncontendedArgs {
					t.Errorf("%.1f arguments sent per uncontended Lock+Unlock, want at most %d", args, uncontendedArgs)
				}
				if cmds > 5 || pubs != 0 {
					t.Errorf("%.2f Redis commands and %d publishes per uncontended Lock+Unlock, want at most 5 and none", cmds, pubs)
				}
			}
		})
	}
}

// lockgenAllocsBudget is the most allocations an uncontended Lock+Unlock
// of lockgen may make: 20 for the reentrant and the simple lock since the
// third session of 2026-11-26 (23 since fdf230a and d4b697e, 25 and 27
// before), two more for slack; bsm/redislock makes 34.
const lockgenAllocsBudget = 22

// TestUncontendedAllocs counts the allocations of one uncontended
// Lock+Unlock (testing.AllocsPerRun, against a real Redis) and fails when
// lockgen makes more than lockgenAllocsBudget or than redislock in the
// same run.
func TestUncontendedAllocs(t *testing.T) {
	allocs := map[string]float64{}
	for _, lib := range []lib{lockgenReentrant, lockgenSimple, redislockDefault} {
		op := uncontended(t, lib, newRedis(t))
		i := 0
		allocs[lib.name] = testing.AllocsPerRun(500, func() {
			if err := op(i); err != nil {
				t.Fatal(err)
			}
			i++
		})
		t.Logf("%s: %.0f allocations per uncontended Lock+Unlock", lib.name, allocs[lib.name])
	}
	for _, name := range []string{lockgenReentrant.name, lockgenSimple.name} {
		if a := allocs[name]; a > lockgenAllocsBudget || a > allocs[redislockDefault.name] {
			t.Errorf("%s: %.0f allocations per uncontended Lock+Unlock, want at most %d and at most redislock's %.0f", name, a, lockgenAllocsBudget, allocs[redislockDefault.name])
		}
	}
}

// kindAllocsBudget is the allocations an uncontended acquire+release of
// each other kind may make (issue 27: at most redislock's 34): measured
// on 2026-11-27 (scripts/bench/README.md, "Issue 27: uncontended kinds";
// the semaphore's 26 since its permit stopped building renewal
// arguments it threw away), two more for slack.
var kindAllocsBudget = map[string]float64{
	"lockgen-fenced": 22, "lockgen-fair": 21, "write": 24, "read": 24, "lockgen-semaphore": 28,
}

// TestUncontendedKindsAllocs is TestUncontendedAllocs for the fenced and
// fair locks, each side of a read-write lock and one permit of a
// semaphore (as BenchmarkUncontendedKindsInterleaved takes them): each
// makes at most its kindAllocsBudget and at most redislock's in the same
// run.
func TestUncontendedKindsAllocs(t *testing.T) {
	ops := map[string]func(int) error{}
	for _, lib := range []lib{lockgenFenced, lockgenFair, lockgenWrite, lockgenRead, redislockDefault} {
		ops[lib.name] = uncontended(t, lib, newRedis(t))
	}
	ops["lockgen-semaphore"] = uncontendedPermits(t, newRedis(t))
	allocs := map[string]float64{}
	for _, name := range []string{"lockgen-fenced", "lockgen-fair", "write", "read", "lockgen-semaphore", redislockDefault.name} {
		op, i := ops[name], 0
		allocs[name] = testing.AllocsPerRun(500, func() {
			if err := op(i); err != nil {
				t.Fatal(err)
			}
			i++
		})
		t.Logf("%s: %.0f allocations per uncontended acquire+release", name, allocs[name])
	}
	for name, budget := range kindAllocsBudget {
		if a := allocs[name]; a > budget || a > allocs[redislockDefault.name] {
			t.Errorf("%s: %.0f allocations per uncontended acquire+release, want at most %.0f and at most redislock's %.0f", name, a, budget, allocs[redislockDefault.name])
		}
	}
}

// TestHandoff runs each library's BenchmarkHandoff for a few hand-offs.
func TestHandoff(t *testing.T) {
	const n = 16
	for _, lib := range handoffLibs {
		t.Run(lib.name, func(t *testing.T) {
			ls := openN(t, lib, contenders)
			res, err := handoff(ls, "test", n)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.handoffs) != n-1 || res.elapsed <= 0 {
				t.Fatalf("%d hand-offs in %v, want %d", len(res.handoffs), res.elapsed, n-1)
			}
			p50, p99, xp50, xp99, self := res.stats()
			t.Logf("%s: p50 %.0fµs p99 %.0fµs, to another client p50 %.0fµs p99 %.0fµs, self %.0f%%", lib.name, p50, p99, xp50, xp99, self)
		})
	}
}

func TestPercentile(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(i + 1)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(ds[:1], 99); got != 1 {
		t.Errorf("percentile of one = %v", got)
	}
}
