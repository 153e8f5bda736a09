package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/bench/benchlocks"
)

// lease is every library's lock TTL (lockgen's is in benchlocks/lockgen.yaml).
const lease = 30 * time.Second

// locker is one client of one library, used by one goroutine: it holds at
// most one lock at a time.
type locker interface {
	// lock takes the lock of the resource with the given id, waiting as
	// the library's retry policy allows and no longer than ctx.
	lock(ctx context.Context, id string) error
	// unlock releases the lock taken by the last lock call.
	unlock(ctx context.Context) error
}

// lib is one library, configured one way.
type lib struct {
	name string
	// open returns a locker over rdb, with its scripts loaded; it is
	// closed when tb ends.
	open func(tb testing.TB, rdb *redis.Client) locker
	// group, when set, returns n lockers that share one client, for the
	// hand-off benchmark; otherwise each locker has a client of its own.
	group func(tb testing.TB, n int) []locker
}

// The libraries, each configured for the uncontended benchmark (no
// retries where that is the default) or the hand-off one (retries).
var (
	// lockgen's reentrant lock, with the watchdog renewing it while held.
	lockgenReentrant = lib{name: "lockgen", open: openLockgen(resource)}
	// lockgen's simple lock, with a fixed lease like the peers'.
	lockgenSimple = lib{name: "lockgen-simple", open: openLockgen(simpleResource)}
	// lockgen's reentrant lock, the lockers sharing one runtime client: one
	// process whose goroutines contend.
	lockgenShared = lib{name: "lockgen-1client", open: openLockgen(resource), group: groupLockgen(resource)}
	// redsync over one pool (one node); its default retry is 32 tries
	// 50-250ms apart, at random.
	redsyncDefault = lib{name: "redsync", open: openRedsync()}
	// redsync retrying every millisecond.
	redsync1ms = lib{name: "redsync-1ms", open: openRedsync(redsync.WithRetryDelay(time.Millisecond))}
	// redislock with default options: it tries once.
	redislockDefault = lib{name: "redislock", open: openRedislock(nil)}
	// redislock retrying every millisecond.
	redislockLinear = lib{name: "redislock", open: openRedislock(func() redislock.RetryStrategy { return redislock.LinearBackoff(time.Millisecond) })}
)

// ---- lockgen, through the code generated from benchlocks/lockgen.yaml

func resource(l *benchlocks.Locks) func(string) *lockrt.Lock { return l.Resource }

func simpleResource(l *benchlocks.Locks) func(string) *lockrt.Lock { return l.SimpleResource }

type lockgenLocker struct {
	take  func(id string) *lockrt.Lock // a generated constructor
	lease *lockrt.Lease
}

func openLockgen(which func(*benchlocks.Locks) func(string) *lockrt.Lock) func(testing.TB, *redis.Client) locker {
	return func(tb testing.TB, rdb *redis.Client) locker {
		return &lockgenLocker{take: which(newLocks(tb, rdb))}
	}
}

func groupLockgen(which func(*benchlocks.Locks) func(string) *lockrt.Lock) func(testing.TB, int) []locker {
	return func(tb testing.TB, n int) []locker {
		take := which(newLocks(tb, newRedis(tb)))
		ls := make([]locker, n)
		for i := range ls {
			ls[i] = &lockgenLocker{take: take}
		}
		return ls
	}
}

// newLocks returns the generated locks over a new runtime client of rdb
// (a node's client or a cluster's), their scripts preloaded; the client
// is closed when tb ends.
func newLocks(tb testing.TB, rdb redis.UniversalClient) *benchlocks.Locks {
	c := lockrt.New(rdb)
	tb.Cleanup(func() { c.Close() })
	if err := benchlocks.Preload(context.Background(), c); err != nil {
		tb.Fatal(err)
	}
	return benchlocks.NewLocks(c)
}

func (l *lockgenLocker) lock(ctx context.Context, id string) (err error) {
	l.lease, err = l.take(id).Lock(ctx)
	return err
}

func (l *lockgenLocker) unlock(ctx context.Context) error { return l.lease.Unlock(ctx) }

// ---- redsync

type redsyncLocker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
	m    *redsync.Mutex
}

// openRedsync returns redsync lockers over one pool with a 30s expiry,
// their tries raised from 32 so that a long wait does not fail, and opts.
func openRedsync(opts ...redsync.Option) func(testing.TB, *redis.Client) locker {
	opts = append([]redsync.Option{redsync.WithExpiry(lease), redsync.WithTries(1 << 30)}, opts...)
	return func(tb testing.TB, rdb *redis.Client) locker {
		l := &redsyncLocker{rs: redsync.New(goredis.NewPool(rdb)), opts: opts}
		warmUp(tb, l)
		return l
	}
}

func (l *redsyncLocker) lock(ctx context.Context, id string) error {
	l.m = l.rs.NewMutex("bench:redsync:res:"+id, l.opts...)
	return l.m.LockContext(ctx)
}

func (l *redsyncLocker) unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: not unlocked")
	}
	return err
}

// ---- redislock

type redislockLocker struct {
	c     *redislock.Client
	retry func() redislock.RetryStrategy // nil: default options
	l     *redislock.Lock
}

func openRedislock(retry func() redislock.RetryStrategy) func(testing.TB, *redis.Client) locker {
	return func(tb testing.TB, rdb *redis.Client) locker {
		l := &redislockLocker{c: redislock.New(rdb), retry: retry}
		warmUp(tb, l)
		return l
	}
}

func (l *redislockLocker) lock(ctx context.Context, id string) (err error) {
	var opt *redislock.Options
	if l.retry != nil {
		opt = &redislock.Options{RetryStrategy: l.retry()}
	}
	l.l, err = l.c.Obtain(ctx, "bench:redislock:res:"+id, lease, opt)
	return err
}

func (l *redislockLocker) unlock(ctx context.Context) error { return l.l.Release(ctx) }

// ----

// warmUp takes and releases a lock once, so that a peer has loaded its
// scripts before it is measured (lockgen's are preloaded).
func warmUp(tb testing.TB, l locker) {
	ctx := context.Background()
	if err := l.lock(ctx, "warm-up"); err != nil {
		tb.Fatal(err)
	}
	if err := l.unlock(ctx); err != nil {
		tb.Fatal(err)
	}
}
