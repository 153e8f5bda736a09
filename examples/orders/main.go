// Command orders is lockgen's demo: a shop whose workers serialise changes
// to an order with a generated, typed lock.
//
// It runs against the Redis at $REDIS_ADDR, or, when that is not set,
// against an embedded in-process Redis (miniredis) whose clock ticks in
// real time. Run it with `make demo`.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/examples/orders/shoplocks"
	lockrt "github.com/lockgen/lockgen/runtime"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

var start = time.Now()

// say prints a line prefixed with the time since the demo started.
func say(format string, args ...any) {
	fmt.Printf("%6.3fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context) error {
	addr, stop, err := redisAddr()
	if err != nil {
		return err
	}
	defer stop()

	// Two processes' worth of clients: each has its own watchdog and
	// pub/sub connection.
	newClient := func() (*lockrt.Client, func()) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		c := lockrt.New(rdb)
		return c, func() { c.Close(); rdb.Close() }
	}
	c1, close1 := newClient()
	defer close1()
	c2, close2 := newClient()
	defer close2()
	if err := shoplocks.Preload(ctx, c1); err != nil {
		return err
	}
	alice, bob := shoplocks.NewLocks(c1), shoplocks.NewLocks(c2)

	fmt.Println("== two workers contend for Order(42)")
	var wg sync.WaitGroup
	for _, w := range []struct {
		name  string
		locks *shoplocks.Locks
	}{{"alice", alice}, {"bob", bob}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := w.locks.Order(42).Lock(ctx)
			if err != nil {
				say("%s: %v", w.name, err)
				return
			}
			say("%s holds %s", w.name, lease.Lock().Key())
			time.Sleep(300 * time.Millisecond)
			say("%s releases it", w.name)
			if err := lease.Unlock(ctx); err != nil {
				say("%s: %v", w.name, err)
			}
		}()
	}
	wg.Wait()

	for _, section := range []func(context.Context, *shoplocks.Locks, *shoplocks.Locks) error{
		reentry, watchdog, lost, notReentrant,
	} {
		if err := section(ctx, alice, bob); err != nil {
			return err
		}
	}
	return nil
}

// Each section below releases what it takes on every path, with a
// deferred Unlock (a second Unlock of a released lease returns ErrNotHeld,
// which the deferred call ignores): the code users copy passes
// cmd/leasecheck, which TestExamplesLeasecheck runs on every example.

func reentry(ctx context.Context, alice, bob *shoplocks.Locks) error {
	fmt.Println("== re-entry: a holder locks again with its lease's context")
	outer, err := alice.Order(7).Lock(ctx)
	if err != nil {
		return err
	}
	defer outer.Unlock(ctx)
	inner, err := alice.Order(7).Lock(outer.Context()) // same owner: re-enters
	if err != nil {
		return err
	}
	defer inner.Unlock(ctx)
	say("alice holds Order(7) twice")
	if err := mustNotObtain(bob.Order(7).TryLock(ctx, 0)); err != nil {
		return fmt.Errorf("bob locking Order(7) held by alice: %w", err)
	}
	say("bob cannot take it meanwhile")
	if err := inner.Unlock(ctx); err != nil {
		return err
	}
	if locked, err := alice.Order(7).IsLocked(ctx); err != nil || !locked {
		return fmt.Errorf("after one of two unlocks: locked=%v, err=%v", locked, err)
	}
	say("after one unlock it is still locked")
	if err := outer.Unlock(ctx); err != nil {
		return err
	}
	if locked, err := alice.Order(7).IsLocked(ctx); err != nil || locked {
		return fmt.Errorf("after both unlocks: locked=%v, err=%v", locked, err)
	}
	say("after the second unlock it is free")
	return nil
}

func watchdog(ctx context.Context, alice, _ *shoplocks.Locks) error {
	fmt.Println("== the watchdog keeps a slow holder's 1s lease alive")
	report := alice.Report("acme", "2026-11-22")
	lease, err := report.Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx)
	for range 5 {
		time.Sleep(500 * time.Millisecond)
		ttl, err := report.TTL(ctx)
		if err != nil || ttl == 0 {
			return fmt.Errorf("the watchdog did not keep the lease: ttl=%v, err=%v", ttl, err)
		}
		say("still working; lease has %v left", ttl.Round(10*time.Millisecond))
	}
	if err := lease.Unlock(ctx); err != nil {
		return err
	}
	say("done after 2.5s on a 1s lease")
	return nil
}

func lost(ctx context.Context, alice, bob *shoplocks.Locks) error {
	fmt.Println("== a lost lock cancels the work done under it")
	lease, err := alice.Report("acme", "2026-11-23").Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx) // ErrLockLost once force-unlocked: nothing to give back
	if _, err := bob.Report("acme", "2026-11-23").ForceUnlock(ctx); err != nil {
		return err
	}
	say("an operator force-unlocked it; alice's work waits on lease.Context()")
	select {
	case <-lease.Context().Done():
	case <-time.After(5 * time.Second):
		return errors.New("a force-unlocked lease was not cancelled")
	}
	say("alice's context is cancelled: %v", context.Cause(lease.Context()))
	return nil
}

func notReentrant(ctx context.Context, alice, _ *shoplocks.Locks) error {
	fmt.Println("== a simple lock is not reentrant")
	m, err := alice.Migration().Lock(ctx)
	if err != nil {
		return err
	}
	defer m.Unlock(ctx)
	err = mustNotObtain(alice.Migration().Lock(m.Context()))
	if !errors.Is(err, lockrt.ErrNotReentrant) {
		return fmt.Errorf("locking a held simple lock again: got %v, want ErrNotReentrant", err)
	}
	say("locking it again: %v", err)
	return m.Unlock(ctx)
}

// mustNotObtain returns the error of an attempt expected to fail, or, when
// it obtained the lock after all, releases it and says so.
func mustNotObtain(lease *lockrt.Lease, err error) error {
	if err == nil {
		lease.Unlock(context.Background())
		return errors.New("obtained a lock held by another owner")
	}
	if errors.Is(err, lockrt.ErrNotObtained) {
		return nil
	}
	return err
}

// redisAddr returns $REDIS_ADDR, or starts an embedded Redis whose clock
// follows the wall clock so that leases expire as they would on a server.
func redisAddr() (string, func(), error) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		fmt.Println("using Redis at", addr)
		return addr, func() {}, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return "", nil, err
	}
	fmt.Println("using an embedded Redis (set REDIS_ADDR to use a real one)")
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return m.Addr(), func() { close(done); m.Close() }, nil
}
