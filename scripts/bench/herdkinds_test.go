package bench

// Herds on lockgen's read-write lock and semaphore (see BenchmarkHerd):
// the waiter registry hands the lock or the freed permits to the waiters
// that can proceed, so what Redis runs per acquisition stays flat in the
// number of waiting clients. The peers have no read-write lock, so the
// writers' herd runs against their exclusive locks; the semaphore herd
// runs against asynq's x/rate semaphore polled every millisecond (see
// semaphore_test.go), on a semaphore of one permit so that every
// acquisition is a hand-off.

import (
	"context"
	"fmt"
	"testing"
)

// herdRWLibs: writers of lockgen's read-write lock against the peers'
// exclusive locks.
var herdRWLibs = []lib{lockgenWrite, redislockLinear, redsyncDefault}

// BenchmarkHerdRW: BenchmarkHerd with lockgen's read-write lock, every
// client taking its write side.
func BenchmarkHerdRW(b *testing.B) { benchHerd(b, herdRWLibs) }

// semLocker makes a semClient a locker for herd; the semaphore is the
// one it was opened on, whatever id herd passes.
type semLocker struct{ c semClient }

func (s semLocker) lock(ctx context.Context, _ string) error { return s.c.acquire(ctx) }
func (s semLocker) unlock(ctx context.Context) error         { return s.c.release(ctx) }

// semHerdLibs are semLibs as herd's libraries: n clients of a semaphore
// of one permit, opened once per benchmark (herd's ids are ignored).
func semHerdLibs() []lib {
	var libs []lib
	for _, sl := range semLibs {
		libs = append(libs, lib{name: sl.name, group: func(tb testing.TB, n int) []locker {
			var ls []locker
			for _, c := range sl.open(tb, n, fmt.Sprintf("herd-%d", n), 1) {
				ls = append(ls, semLocker{c})
			}
			return ls
		}})
	}
	return libs
}

// BenchmarkHerdSemaphore: BenchmarkHerd on a semaphore of one permit,
// lockgen's against asynq's polled every millisecond.
func BenchmarkHerdSemaphore(b *testing.B) { benchHerd(b, semHerdLibs()) }

// TestHerdKinds runs one short herd round of lockgen's read-write lock
// and semaphore with 8 clients and checks the scripts per acquisition.
func TestHerdKinds(t *testing.T) {
	libs := []lib{lockgenWrite, semHerdLibs()[0]}
	for _, lib := range libs {
		t.Run(lib.name, func(t *testing.T) {
			ls := openN(t, lib, 8)
			for _, l := range ls {
				warmUp(t, l)
			}
			res, err := herd(t, ls, "herdkinds-test", 80, 0)
			if err != nil {
				t.Fatal(err)
			}
			s := res.stats()
			t.Logf("%s: %+v", lib.name, s)
			if s.evalsha > 2.5 {
				t.Errorf("%s: %.2f scripts per acquisition with 8 clients, want <= 2.5", lib.name, s.evalsha)
			}
		})
	}
}
