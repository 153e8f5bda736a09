package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// lossy loses replies: a request holding an armed pattern (a script's
// SHA1) goes through to Redis, which runs it, and its connection is closed
// as the reply begins to come back. The client sees its connection
// dropped after the command ran, and go-redis sends the command again
// (MaxRetries): the fault a proxy, a load balancer or a failover makes.
type lossy struct {
	mu   sync.Mutex
	arms map[string]int // pattern -> replies still to lose
	lost atomic.Int32   // replies lost so far
	// between, when set, runs once a reply is lost, before the client
	// learns of it: what happens between a command's run and its resend.
	between func()
}

func newLossy() *lossy { return &lossy{arms: map[string]int{}} }

// lose arms the next n requests that contain pattern.
func (l *lossy) lose(pattern string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.arms[pattern] += n
}

// armed reports whether the request b is to lose its reply, disarming
// one of its pattern's.
func (l *lossy) armed(b []byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, n := range l.arms {
		if n > 0 && bytes.Contains(b, []byte(p)) {
			l.arms[p] = n - 1
			return true
		}
	}
	return false
}

// left returns how many armed replies were not lost yet.
func (l *lossy) left() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, k := range l.arms {
		n += k
	}
	return n
}

func (l *lossy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: c, l: l}, nil
}

// client returns a go-redis client of b (go-redis' defaults otherwise)
// whose connections lose the armed replies.
func (l *lossy) client(b backend) redis.UniversalClient {
	if b.name == "cluster" {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs, Dialer: l.dial})
	}
	return redis.NewClient(&redis.Options{Addr: single.Addr, Dialer: l.dial})
}

type lossyConn struct {
	net.Conn
	l    *lossy
	lose atomic.Bool // the request written last is to lose its reply
}

func (c *lossyConn) Write(b []byte) (int, error) {
	if c.l.armed(b) {
		c.lose.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *lossyConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.lose.Load() { // Redis ran the command: its reply is lost
		c.l.lost.Add(1)
		c.Conn.Close()
		if c.l.between != nil {
			c.l.between()
		}
		return 0, io.EOF
	}
	return n, err
}

// lossyClient returns a runtime client over a lossy connection to b,
// closed when the test ends. Every script of the runtime is loaded first,
// so that a reply lost is a script's (had Redis answered NOSCRIPT, the
// runtime would send the script once more, as EVAL, and it would run once).
func lossyClient(t *testing.T, b backend) (*lockrt.Client, *lossy, redis.UniversalClient) {
	l := newLossy()
	rdb := l.client(b)
	c := lockrt.New(rdb)
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	if err := c.Preload(context.Background(), lockimpl.Scripts().All()...); err != nil {
		t.Fatal(err)
	}
	return c, l, rdb
}

// mustLose fails the test when an armed reply was not lost: the call did
// not send the script the test meant to fault.
func mustLose(t *testing.T, l *lossy) {
	t.Helper()
	if n := l.left(); n > 0 {
		t.Fatalf("%d armed replies not lost: the call did not run the script", n)
	}
}

// reentryRound takes lk (a lock, or one side of a read-write lock) as a
// new owner, re-enters it, and gives both holds up, each call losing its
// reply once (go-redis sends it again); after each it reads the owner's
// holds from Redis (1, 2, 1) and fails unless every call returned nil and
// the lock ends free (free reports whether it is).
func reentryRound(t *testing.T, l *lossy, lk *lockrt.Lock, d *lockrt.LockDef, free func() (bool, error)) {
	t.Helper()
	ctx := context.Background()
	acquire, release := d.Scripts.Acquire.SHA1, d.Scripts.Release.SHA1
	holds := func(want int, le *lockrt.Lease) {
		t.Helper()
		if n, err := lk.HoldCount(context.WithoutCancel(le.Context())); err != nil || n != want {
			t.Fatalf("hold count %d (%v), want %d", n, err, want)
		}
	}
	call := func(script, what string, f func() error) {
		t.Helper()
		l.lose(script, 1)
		if err := f(); err != nil {
			t.Fatalf("%s whose reply was lost: %v", what, err)
		}
		mustLose(t, l)
	}
	var outer, inner *lockrt.Lease
	call(acquire, "Lock", func() (err error) { outer, err = lk.Lock(ctx); return err })
	holds(1, outer)
	call(acquire, "re-entry", func() (err error) { inner, err = lk.Lock(outer.Context()); return err })
	holds(2, outer)
	if inner.Token() != outer.Token() {
		t.Errorf("re-entry's token %d, the hold's %d", inner.Token(), outer.Token())
	}
	call(release, "inner Unlock", func() error { return inner.Unlock(ctx) })
	holds(1, outer)
	if err := outer.Context().Err(); err != nil {
		t.Fatalf("outer hold ended by the inner Unlock: %v", context.Cause(outer.Context()))
	}
	call(release, "last Unlock", func() error { return outer.Unlock(ctx) })
	if ok, err := free(); err != nil || !ok {
		t.Fatalf("still locked after both Unlocks (%v)", err)
	}
}

// TestLockLostReplies: every call of a reentrant, a fenced and a fair
// lock whose script ran and whose reply was lost (go-redis sends it
// again) has one effect, read from Redis: a new owner's Lock one hold, a
// re-entry one more, an inner Unlock one less, a last Unlock the lock
// free; and no call returns an error. So does the first hold's Unlock
// while the re-entry's is left.
func TestLockLostReplies(t *testing.T) {
	for _, kind := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Fenced, lockrt.Fair} {
		t.Run(kind.String(), func(t *testing.T) {
			eachBackend(t, func(t *testing.T, b backend) {
				c, l, rdb := lossyClient(t, b)
				d := def(t, kind, 5*time.Second, true, time.Second)
				lk := c.Lock(d, key(t))
				ctx := context.Background()
				free := func() (bool, error) { n, err := rdb.Exists(ctx, lk.Key()).Result(); return n == 0, err }
				for range 2 { // the second round takes the lock's slow path (a value with a record)
					reentryRound(t, l, lk, d, free)
				}
				// The first hold released first, the re-entry's left.
				outer, err := lk.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				inner, err := lk.Lock(outer.Context())
				if err != nil {
					t.Fatal(err)
				}
				l.lose(d.Scripts.Release.SHA1, 1)
				if err := outer.Unlock(ctx); err != nil {
					t.Fatalf("first hold's Unlock whose reply was lost: %v", err)
				}
				mustLose(t, l)
				if n, err := lk.HoldCount(context.WithoutCancel(inner.Context())); err != nil || n != 1 {
					t.Fatalf("hold count %d (%v), want 1", n, err)
				}
				if err := inner.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestRWLockLostReplies: TestLockLostReplies for both sides of a
// read-write lock.
func TestRWLockLostReplies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c, l, _ := lossyClient(t, b)
		d := def(t, lockrt.ReadWrite, 5*time.Second, true, time.Second)
		rw := c.RWLock(d, key(t))
		free := func() (bool, error) { locked, err := rw.IsLocked(context.Background()); return !locked, err }
		for _, side := range []*lockrt.Lock{rw.Read(), rw.Write()} {
			reentryRound(t, l, side, d, free)
		}
	})
}

// TestSemaphoreLostReplies: an Acquire(1) whose reply was lost holds one
// permit, not two, and a Release whose reply was lost returns nil and
// frees it; so does a Drain's.
func TestSemaphoreLostReplies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c, l, _ := lossyClient(t, b)
		d := semDef(t, 3, 5*time.Second, true, time.Second)
		s := c.Semaphore(d, key(t))
		ctx := context.Background()
		acquired := func(want int) {
			t.Helper()
			if n, err := s.Acquired(ctx); err != nil || n != want {
				t.Fatalf("permits held %d (%v), want %d", n, err, want)
			}
		}
		l.lose(d.Scripts.Acquire.SHA1, 1)
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		mustLose(t, l)
		acquired(1)
		l.lose(d.Scripts.Release.SHA1, 1)
		if err := p.Release(ctx); err != nil {
			t.Fatalf("Release whose reply was lost: %v", err)
		}
		mustLose(t, l)
		acquired(0)
		l.lose(d.Scripts.Acquire.SHA1, 1)
		p, err = s.Drain(ctx)
		if err != nil || p.Permits() != 3 {
			t.Fatalf("Drain: %v, %v", p, err)
		}
		mustLose(t, l)
		acquired(3)
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		acquired(0)
	})
}

// TestSemaphoreFastReleaseResent: a release of a permit the acquire's
// fast path took is first sent with the holds' keys alone; its first run
// releases the permit and its reply is lost, and before the resend a
// waiter comes (here its flag 'q', set by hand), so that the resend
// answers "send it again whole" (HandOnDue). The whole release then finds
// nothing held: that was this call's own first run, and Release returns
// nil. Before, the runtime forgot the fast call's sends and returned
// ErrPermitNotHeld (make torture counted one, err-release, under
// lose-replies).
func TestSemaphoreFastReleaseResent(t *testing.T) {
	c, l, _ := lossyClient(t, backends()[0])
	admin := single.Client()
	d := semDef(t, 1, 5*time.Second, true, time.Second)
	k := key(t)
	ctx := context.Background()
	p, err := c.Semaphore(d, k).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.between = func() {
		if err := admin.HSet(ctx, keys.Sub(k, "counts"), "q", 1).Err(); err != nil {
			t.Error(err)
		}
	}
	l.lose(d.Scripts.Release.SHA1, 1)
	if err := p.Release(ctx); err != nil {
		t.Fatalf("Release whose first run released the permit: %v", err)
	}
	mustLose(t, l)
	if n, err := admin.ZCard(ctx, k).Result(); err != nil || n != 0 {
		t.Fatalf("holds left: %d (%v)", n, err)
	}
}

// TestLatchLostReplies: a CountDown whose reply was lost counts once.
func TestLatchLostReplies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c, l, _ := lossyClient(t, b)
		d := latchDef(t, 3, time.Minute)
		lt := c.Latch(d, key(t))
		ctx := context.Background()
		for want := 2; want >= 0; want-- {
			l.lose(d.Scripts.CountDown.SHA1, 1)
			n, err := lt.CountDown(ctx)
			if err != nil || n != want {
				t.Fatalf("CountDown whose reply was lost: %d, %v; want %d", n, err, want)
			}
			mustLose(t, l)
			if n, err := lt.Count(ctx); err != nil || n != want {
				t.Fatalf("count %d (%v), want %d", n, err, want)
			}
		}
	})
}

// TestQueueLostReplies: an Offer whose reply was lost enqueues its item
// once (plain, delayed and reliable queues, one item and a batch); a
// reliable Take whose reply was lost hands back the delivery its first
// run claimed, with nothing else left in flight; an Ack and a Nack whose
// replies were lost return nil and take effect once.
func TestQueueLostReplies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c, l, rdb := lossyClient(t, b)
		ctx := withTimeout(t, 30*time.Second)
		t.Run("plain", func(t *testing.T) {
			d := queueDef(t, true, 0, 0)
			q := lockrt.NewDelayedQueue(c, d, lockrt.JSON[int]{}, key(t))
			l.lose(d.Scripts.Offer.SHA1, 1)
			if err := q.Offer(ctx, 1); err != nil {
				t.Fatal(err)
			}
			mustLose(t, l)
			l.lose(d.Scripts.Offer.SHA1, 1)
			if err := q.OfferMany(ctx, 2, 3); err != nil {
				t.Fatal(err)
			}
			mustLose(t, l)
			l.lose(d.Scripts.Offer.SHA1, 1)
			if err := q.OfferAt(ctx, 4, time.Now()); err != nil { // not in the future: ready now
				t.Fatal(err)
			}
			mustLose(t, l)
			if n, err := q.Len(ctx); err != nil || n != 4 {
				t.Fatalf("%d items ready (%v), want 4", n, err)
			}
			l.lose(d.Scripts.Offer.SHA1, 1)
			if err := q.OfferIn(ctx, 5, time.Hour); err != nil {
				t.Fatal(err)
			}
			mustLose(t, l)
			if st, err := q.Stats(ctx); err != nil || st.Delayed != 1 {
				t.Fatalf("stats %+v (%v), want 1 delayed", st, err)
			}
		})
		t.Run("reliable", func(t *testing.T) {
			d := queueDef(t, false, 10*time.Second, 3)
			q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
			for i := range 3 {
				l.lose(d.Scripts.Offer.SHA1, 1)
				if _, err := q.Offer(ctx, i); err != nil {
					t.Fatal(err)
				}
				mustLose(t, l)
			}
			if n, err := q.Len(ctx); err != nil || n != 3 {
				t.Fatalf("%d items ready (%v), want 3", n, err)
			}
			l.lose(d.Scripts.Take.SHA1, 1)
			dl, err := q.TryTake(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			mustLose(t, l)
			if dl.Value != 0 || dl.Attempt() != 1 {
				t.Fatalf("took %d (attempt %d), want 0 (attempt 1)", dl.Value, dl.Attempt())
			}
			st, err := q.Stats(ctx)
			if err != nil || st.InFlight != 1 || st.Ready != 2 {
				t.Fatalf("stats %+v (%v), want 1 in flight and 2 ready", st, err)
			}
			l.lose(d.Scripts.Ack.SHA1, 1)
			if err := dl.Ack(ctx); err != nil {
				t.Fatalf("Ack whose reply was lost: %v", err)
			}
			mustLose(t, l)
			dl, err = q.TryTake(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			l.lose(d.Scripts.Nack.SHA1, 1)
			if err := dl.Nack(ctx, nil); err != nil {
				t.Fatalf("Nack whose reply was lost: %v", err)
			}
			mustLose(t, l)
			if st, err := q.Stats(ctx); err != nil || st.InFlight != 0 || st.Ready != 2 {
				t.Fatalf("stats %+v (%v), want 2 ready", st, err)
			}
			dl, err = q.TryTake(ctx, 0)
			if err != nil || dl.Value != 2 {
				t.Fatalf("took %v (%v), want 2", dl, err)
			}
			if err := dl.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			dl, err = q.TryTake(ctx, 0)
			if err != nil || dl.Value != 1 || dl.Attempt() != 2 {
				t.Fatalf("took %v (%v), want 1 on its second delivery", dl, err)
			}
			if err := dl.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		})
		// A waiting Take registers once although its registration ran
		// twice (queue_pop with its consumer, or the take script on a
		// reliable queue),
		// gets the item an offer whose reply was lost wakes it for, and
		// leaves no entry behind.
		for _, reliable := range []bool{false, true} {
			t.Run(fmt.Sprintf("waiting/reliable=%v", reliable), func(t *testing.T) {
				vis := time.Duration(0)
				if reliable {
					vis = 10 * time.Second
				}
				d := queueDef(t, false, vis, 3)
				k := key(t)
				got := make(chan int, 1)
				var offer func() error
				if reliable {
					q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, k)
					offer = func() error { _, err := q.Offer(ctx, 7); return err }
					l.lose(d.Scripts.Take.SHA1, 1)
					go func() {
						dl, err := q.Take(ctx)
						if err != nil {
							t.Error(err)
							got <- -1
							return
						}
						if dl.Attempt() != 1 {
							t.Errorf("delivery attempt %d, want 1", dl.Attempt())
						}
						got <- dl.Value
					}()
				} else {
					q := lockrt.NewQueue(c, d, lockrt.JSON[int]{}, k)
					offer = func() error { return q.Offer(ctx, 7) }
					l.lose(d.Scripts.Pop.SHA1, 1)
					go func() {
						v, err := q.Take(ctx)
						if err != nil {
							t.Error(err)
						}
						got <- v
					}()
				}
				waitTakers(t, rdb, k, 1)
				mustLose(t, l)
				l.lose(d.Scripts.Offer.SHA1, 1)
				if err := offer(); err != nil {
					t.Fatal(err)
				}
				mustLose(t, l)
				if v := <-got; v != 7 {
					t.Fatalf("took %d, want 7", v)
				}
				if n, err := rdb.ZCard(ctx, k+":takers").Result(); err != nil || n != 0 {
					t.Errorf("%d consumers still registered (%v), want 0", n, err)
				}
			})
		}
	})
}

// TestNilLeases: the nil lease or permit a failed TryLock or TryAcquire
// returns answers Unlock or Release with ErrNotHeld or ErrPermitNotHeld,
// and its Context has ended with that cause; nothing panics.
func TestNilLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var le *lockrt.Lease
	var ml *lockrt.MultiLease
	var rl *lockrt.RedLockLease
	var p *lockrt.Permit
	for name, unlock := range map[string]func() error{
		"Lease":        func() error { return le.Unlock(ctx) },
		"MultiLease":   func() error { return ml.Unlock(ctx) },
		"RedLockLease": func() error { return rl.Unlock(ctx) },
	} {
		if err := unlock(); !errors.Is(err, lockrt.ErrNotHeld) {
			t.Errorf("nil %s: Unlock = %v, want ErrNotHeld", name, err)
		}
	}
	if err := p.Release(ctx); !errors.Is(err, lockrt.ErrPermitNotHeld) {
		t.Errorf("nil Permit: Release = %v, want ErrPermitNotHeld", err)
	}
	for name, c := range map[string]context.Context{
		"Lease": le.Context(), "MultiLease": ml.Context(), "RedLockLease": rl.Context(), "Permit": p.Context(),
	} {
		if c.Err() == nil || !(errors.Is(context.Cause(c), lockrt.ErrNotHeld) || errors.Is(context.Cause(c), lockrt.ErrPermitNotHeld)) {
			t.Errorf("nil %s: Context().Err() = %v, cause %v", name, c.Err(), context.Cause(c))
		}
	}
	if held, err := le.IsHeld(ctx); held || err != nil {
		t.Errorf("nil Lease: IsHeld = %v, %v", held, err)
	}
}

// silent is a TCP server that accepts connections and never answers: a
// Redis that cannot be reached (a partition, a dead load balancer).
func silent(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// silentClient returns a runtime client of a silent server, closed when
// the test ends.
func silentClient(t *testing.T) *lockrt.Client {
	rdb := redis.NewClient(&redis.Options{Addr: silent(t)})
	c := lockrt.New(rdb)
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c
}

// TestDeadlinesWhenUnreachable: against a Redis that accepts connections
// and never answers (go-redis' defaults: 3 s read timeout, 3 retries), a
// Lock, a TryLock, a semaphore's Acquire, a reliable queue's TryTake and
// a RedLock's Lock and TryLock (three such nodes), and the reads
// (IsLocked ... DeadLetters, Limiter.Config, the delayed-queue reads)
// return within their context's deadline plus the stated bound
// (deadlineSlack): their clean-up goes on in the background.
func TestDeadlinesWhenUnreachable(t *testing.T) {
	t.Parallel()
	c := silentClient(t)
	const budget = 500 * time.Millisecond
	lk := c.Lock(def(t, lockrt.Reentrant, 5*time.Second, true, time.Minute), key(t, "lock"))
	s := c.Semaphore(semDef(t, 2, 5*time.Second, true, time.Minute), key(t, "sem"))
	q := lockrt.NewReliableQueue(c, queueDef(t, false, 5*time.Second, 3), lockrt.JSON[int]{}, key(t, "queue"))
	lt := c.Latch(latchDef(t, 3, time.Minute), key(t, "latch"))
	pq := lockrt.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, key(t, "plain"))
	silentNodes := []*lockrt.Client{silentClient(t), silentClient(t), silentClient(t)}
	red := lockrt.NewQuorum(silentNodes...).RedLock(redDef(t, 30*time.Second, true, time.Minute), key(t, "red"))
	lim := c.Limiter(limiterDef(t, lockrt.GCRA, 10, time.Second, 2, lockrt.ScopeOverall), key(t, "limiter"))
	dq := lockrt.NewDelayedReliableQueue(c, queueDef(t, true, 5*time.Second, 3), lockrt.JSON[int]{}, key(t, "delayed"))
	el := lockrt.NewElection(c.Lock(def(t, lockrt.Fenced, 5*time.Second, true, 0), key(t, "leader")))
	for name, call := range map[string]func(context.Context) error{
		"Lock":       func(ctx context.Context) error { _, err := lk.Lock(ctx); return err },
		"TryLock":    func(ctx context.Context) error { _, err := lk.TryLock(context.Background(), budget); return err },
		"Acquire":    func(ctx context.Context) error { _, err := s.Acquire(ctx, 1); return err },
		"TryTake":    func(ctx context.Context) error { _, err := q.TryTake(context.Background(), budget); return err },
		"TakeWithin": func(ctx context.Context) error { _, err := q.Take(ctx); return err },
		"RedLock":    func(ctx context.Context) error { _, err := red.Lock(ctx); return err },
		"Campaign":   func(ctx context.Context) error { _, err := el.Campaign(ctx); return err },
		// Reads and waits that change nothing.
		"IsLocked":        func(ctx context.Context) error { _, err := lk.IsLocked(ctx); return err },
		"TTL":             func(ctx context.Context) error { _, err := lk.TTL(ctx); return err },
		"Available":       func(ctx context.Context) error { _, err := s.Available(ctx); return err },
		"LatchCount":      func(ctx context.Context) error { _, err := lt.Count(ctx); return err },
		"Await":           func(ctx context.Context) error { return lt.Await(ctx) },
		"Len":             func(ctx context.Context) error { _, err := q.Len(ctx); return err },
		"PlainTake":       func(ctx context.Context) error { _, err := pq.Take(ctx); return err },
		"PlainTryTake":    func(ctx context.Context) error { _, err := pq.TryTake(context.Background(), budget); return err },
		"Stats":           func(ctx context.Context) error { _, err := q.Stats(ctx); return err },
		"Peek":            func(ctx context.Context) error { _, err := q.Peek(ctx); return err },
		"DeadLetters":     func(ctx context.Context) error { _, err := q.DeadLetters(ctx, 1); return err },
		"RedTryLock":      func(ctx context.Context) error { _, err := red.TryLock(context.Background(), budget); return err },
		"LimiterConfig":   func(ctx context.Context) error { _, _, err := lim.Config(ctx); return err },
		"PeekDelayed":     func(ctx context.Context) error { _, err := dq.PeekDelayed(ctx, 1); return err },
		"ReadDelayed":     func(ctx context.Context) error { _, err := dq.ReadDelayed(ctx); return err },
		"ContainsDelayed": func(ctx context.Context) error { _, err := dq.ContainsDelayed(ctx, 1); return err },
		"Leader":          func(ctx context.Context) error { _, err := el.Leader(ctx); return err },
		"Observe": func(ctx context.Context) error {
			for range el.Observe(ctx) { // closed when ctx ends
			}
			return ctx.Err()
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			start := time.Now()
			err := call(ctx)
			took := time.Since(start)
			t.Logf("returned %v after its %v deadline (%v)", took-budget, budget, err)
			if took > budget+deadlineSlack {
				t.Errorf("returned after %v (%v), want within %v + %v", took, err, budget, deadlineSlack)
			}
			if err == nil {
				t.Error("no error from an unreachable Redis")
			}
		})
	}
}

// deadlineSlack is what the test lets a call take past its deadline:
// the runtime's bound is the clean-up's wait (cleanUpWait, 50 ms), and a
// loaded 2-core machine adds its scheduling (seen: 144 ms at load 24);
// without the bound the calls took 1 to 5.7 s (a RedLock's attempt waited
// its 1 s node timeout; go-redis' DialTimeout, 5 s), which this fails.
const deadlineSlack = 500 * time.Millisecond

// TestMultiLockLostReplies: an atomic multi-lock acquire whose reply was
// lost (go-redis runs it again) holds every lock once, and one Unlock
// frees them all. On one node: its locks' keys are in one server (on a
// cluster, in different slots, the multi-lock takes them one by one).
func TestMultiLockLostReplies(t *testing.T) {
	t.Parallel()
	func(t *testing.T, b backend) {
		c, l, rdb := lossyClient(t, b)
		ctx := context.Background()
		dr := def(t, lockrt.Reentrant, 5*time.Second, true, time.Second)
		ds := def(t, lockrt.Simple, 5*time.Second, false, time.Second)
		a, s := c.Lock(dr, key(t, "a")), c.Lock(ds, key(t, "b"))
		m := lockrt.NewMultiLock(a, s)
		l.lose(dr.Scripts.MultiAcquire.SHA1, 1)
		ml, err := m.Lock(ctx)
		if err != nil {
			t.Fatalf("multi-lock whose reply was lost: %v", err)
		}
		mustLose(t, l)
		if n, err := a.HoldCount(context.WithoutCancel(ml.Context())); err != nil || n != 1 {
			t.Fatalf("reentrant lock: %d holds (%v), want 1", n, err)
		}
		if err := ml.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, a.Key(), s.Key()).Val(); n != 0 {
			t.Fatalf("%d locks still held after Unlock", n)
		}
	}(t, backends()[0])
}

// TestExactlyOnceCosts counts, from INFO commandstats of a node of its
// own, the Redis commands the exactly-once records cost: none on an
// uncontended Lock+Unlock (SET, GET, DEL) or a re-entry (whose SET NX
// answers the value it found, GET), a CountDown's
// GET and SET (no DECR), an Offer's SET NX (plain: EVALSHA, SET, RPUSH);
// a claim's is one SET too (queue_take's record), not asserted here.
func TestExactlyOnceCosts(t *testing.T) {
	t.Parallel()
	ctx := withTimeout(t, 30*time.Second)
	node := ownClient(t)
	nodes := []*redis.Client{node}
	c := lockrt.New(node)
	defer c.Close()
	d := def(t, lockrt.Reentrant, 5*time.Second, true, time.Second)
	ld := latchDef(t, 3, time.Minute)
	qd := queueDef(t, false, time.Minute, 3)
	if err := c.Preload(ctx, d.Scripts.Acquire, d.Scripts.Release, ld.Scripts.CountDown, qd.Scripts.Offer, qd.Scripts.Take); err != nil {
		t.Fatal(err)
	}
	lk := c.Lock(d, key(t, "lock"))
	check := commandCheck(t, nodes)
	check("Lock+Unlock", func() error {
		le, err := lk.Lock(ctx)
		if err != nil {
			return err
		}
		return le.Unlock(ctx)
	}, map[string]int64{"evalsha": 2, "set": 1, "get": 1, "del": 1})
	outer, err := lk.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("re-entry+inner Unlock", func() error {
		le, err := lk.Lock(outer.Context())
		if err != nil {
			return err
		}
		return le.Unlock(ctx)
	}, map[string]int64{"evalsha": 2, "set": 3, "get": 1, "del": 0}) // the re-entry's SET NX answers the value (GET): no GET of its own
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lt := c.Latch(ld, key(t, "latch"))
	check("CountDown", func() error { _, err := lt.CountDown(ctx); return err },
		map[string]int64{"evalsha": 1, "get": 1, "set": 1, "decr": 0})
	plain := lockrt.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, key(t, "plain"))
	check("plain Offer", func() error { return plain.Offer(ctx, 1) },
		map[string]int64{"evalsha": 1, "set": 1, "rpush": 1, "zpopmin": 1}) // nobody waits: one ZPOPMIN of no key, no PUBLISH
	rel := lockrt.NewReliableQueue(c, qd, lockrt.JSON[int]{}, key(t, "reliable"))
	check("reliable Offer", func() error { _, err := rel.Offer(ctx, 1); return err },
		map[string]int64{"evalsha": 1, "set": 1, "hset": 1, "rpush": 1, "zpopmin": 1, "publish": 0})
	// A first claim serves the queue on this client's delay timer (its
	// first move) and arms the timer for the claim's deadline (it announces
	// it: the timer runs another move). The claim measured next comes due
	// after that, so it announces nothing and no move joins its window.
	if _, err := rel.Offer(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := rel.TryTake(ctx, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, failAfter, func() bool { return !c.TimerMoving() }, "the delay timer kept moving")
	// The claim's record is one SET more; the claim's GET and SET of the
	// queue's armed time are not counted here, and its script is counted by
	// a hook rather than INFO commandstats: the client's delay timer, woken
	// by an announcement, may run its move (an EVALSHA that reads armed)
	// in the same window.
	h := &cmdLog{}
	c.Redis().AddHook(h)
	var dl *lockrt.Delivery[int]
	check("reliable TryTake", func() (err error) { dl, err = rel.TryTake(ctx, 0); return err },
		map[string]int64{"lpop": 1, "hmget": 1, "hget": 0, "hincrby": 1, "lrange": 0})
	takes := 0
	for _, cmd := range h.take() {
		if cmd == "evalsha "+qd.Scripts.Take.SHA1 {
			takes++
		}
	}
	if takes != 1 {
		t.Errorf("reliable TryTake: %d EVALSHA of the take script, want 1", takes)
	}
	// An Ack of a first delivery: EVALSHA, HGET, ZREM, HDEL, HDEL.
	check("reliable Ack", func() error { return dl.Ack(ctx) },
		map[string]int64{"hget": 1, "zscore": 0, "zrem": 1, "hdel": 2})
}

// TestEnqueue: Enqueue returns the item's id, the one its delivery has;
// under a dedupe key a second Enqueue within the window adds nothing and
// returns the first id, also when its reply was lost; RemoveID removes a
// ready item by id, once.
func TestEnqueue(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c, l, _ := lossyClient(t, b)
		ctx := withTimeout(t, 30*time.Second)
		d := queueDef(t, true, 10*time.Second, 3)
		q := lockrt.NewDelayedReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
		id1, err := q.Enqueue(ctx, 1, lockrt.WithKey("order-1", time.Minute))
		if err != nil || id1 == "" {
			t.Fatalf("Enqueue: %q, %v", id1, err)
		}
		l.lose(d.Scripts.Offer.SHA1, 1)
		id2, err := q.Enqueue(ctx, 2, lockrt.WithKey("order-1", time.Minute))
		if err != nil || id2 != id1 {
			t.Fatalf("second Enqueue under the key: %q, %v; want %q", id2, err, id1)
		}
		mustLose(t, l)
		later, err := q.Enqueue(ctx, 3, lockrt.After(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := q.Stats(ctx); err != nil || st.Ready != 1 || st.Delayed != 1 {
			t.Fatalf("stats %+v (%v), want 1 ready and 1 delayed", st, err)
		}
		if ok, err := q.RemoveID(ctx, later); err != nil || !ok {
			t.Fatalf("RemoveID of the delayed item: %v, %v", ok, err)
		}
		if ok, err := q.RemoveID(ctx, later); err != nil || ok {
			t.Fatalf("RemoveID again: %v, %v; want false", ok, err)
		}
		dl, err := q.TryTake(ctx, 0)
		if err != nil || dl.ID() != id1 || dl.Value != 1 {
			t.Fatalf("took %v (%v), want item %q", dl, err, id1)
		}
		if err := dl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, 4, lockrt.WithKey("", time.Minute)); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("empty key: %v, want ErrInvalidArgument", err)
		}
		// Dedupe takes the spec's window; a queue without one refuses it.
		if _, err := q.Enqueue(ctx, 5, lockrt.Dedupe("order-2")); !errors.Is(err, lockrt.ErrInvalidArgument) {
			t.Fatalf("Dedupe without a spec window: %v, want ErrInvalidArgument", err)
		}
		dd := queueDef(t, false, 10*time.Second, 3)
		dd.Dedupe = time.Hour
		dq := lockrt.NewReliableQueue(c, dd, lockrt.JSON[int]{}, key(t, "dedupe"))
		first, err := dq.Enqueue(ctx, 6, lockrt.Dedupe("order-3"))
		if err != nil {
			t.Fatal(err)
		}
		if again, err := dq.Enqueue(ctx, 7, lockrt.Dedupe("order-3")); err != nil || again != first {
			t.Fatalf("Dedupe again: %q, %v; want %q", again, err, first)
		}
		if ttl, err := c.Redis().PTTL(ctx, dq.Key()+":key:order-3").Result(); err != nil || ttl < 59*time.Minute {
			t.Fatalf("the dedupe key lives %v (%v), want the spec's hour", ttl, err)
		}
		if n, err := dq.Len(ctx); err != nil || n != 1 {
			t.Fatalf("%d items (%v), want 1", n, err)
		}
	})
}

// commandCheck returns a check that runs f and compares the commands it
// made Redis run (INFO commandstats of nodes, reset first) with want.
func commandCheck(t *testing.T, nodes []*redis.Client) func(what string, f func() error, want map[string]int64) {
	return func(what string, f func() error, want map[string]int64) {
		t.Helper()
		resetStats(t, nodes)
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for cmd, n := range want {
			if got := commandCalls(t, nodes, cmd); got != n {
				t.Errorf("%s: %d %s calls, want %d", what, got, cmd, n)
			}
		}
	}
}

// TestSemaphoreCapacityLostReplies: AddPermits whose reply was lost adds
// once; TrySetPermits whose reply was lost reports that it set the
// capacity.
func TestSemaphoreCapacityLostReplies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		c, l, _ := lossyClient(t, b)
		ctx := context.Background()
		d := semDef(t, 3, 5*time.Second, true, time.Second)
		s := c.Semaphore(d, key(t))
		l.lose(d.Scripts.Capacity.SHA1, 1)
		if ok, err := s.TrySetPermits(ctx, 5); err != nil || !ok {
			t.Fatalf("TrySetPermits whose reply was lost: %v, %v; want true", ok, err)
		}
		mustLose(t, l)
		l.lose(d.Scripts.Capacity.SHA1, 1)
		if n, err := s.AddPermits(ctx, 2); err != nil || n != 7 {
			t.Fatalf("AddPermits whose reply was lost: %d, %v; want 7", n, err)
		}
		mustLose(t, l)
		if n, err := s.Capacity(ctx); err != nil || n != 7 {
			t.Fatalf("capacity %d (%v), want 7", n, err)
		}
		if n, err := s.Available(ctx); err != nil || n != 7 {
			t.Fatalf("available %d (%v), want 7", n, err)
		}
	})
}

// TestQueueOpsLostReplies: a queue's Redrive, Remove, Drain, RemoveID and
// the dead-lettering of an item that does not decode, each losing its
// reply once (go-redis sends it again), have one effect, counted from
// Redis, and answer what their first run did: Redrive(2) moves two dead
// letters, Remove one of two equal items, Drain hands back the items its
// first run took (before, they were lost), the dead list gets one letter.
func TestQueueOpsLostReplies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 30*time.Second)
		c, l, rdb := lossyClient(t, b)
		d := queueDef(t, false, 10*time.Second, 3)
		q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, key(t))
		stats := func(want lockrt.QueueStats) {
			t.Helper()
			if st, err := q.Stats(ctx); err != nil || st != want {
				t.Fatalf("stats %+v (%v), want %+v", st, err, want)
			}
		}
		if _, err := q.OfferMany(ctx, 1, 2, 3, 4, 4, 5); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			dl, err := q.TryTake(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := dl.Bury(ctx, errors.New("test")); err != nil {
				t.Fatal(err)
			}
		}
		stats(lockrt.QueueStats{Ready: 3, Dead: 3})
		l.lose(d.Scripts.Redrive.SHA1, 1)
		if n, err := q.Redrive(ctx, 2); err != nil || n != 2 {
			t.Fatalf("Redrive(2) whose reply was lost = %d, %v; want 2", n, err)
		}
		mustLose(t, l)
		stats(lockrt.QueueStats{Ready: 5, Dead: 1})
		l.lose(d.Scripts.Remove.SHA1, 1)
		if ok, err := q.Remove(ctx, 4); err != nil || !ok {
			t.Fatalf("Remove(4) whose reply was lost = %v, %v; want true", ok, err)
		}
		mustLose(t, l)
		stats(lockrt.QueueStats{Ready: 4, Dead: 1})
		id, err := q.Enqueue(ctx, 9)
		if err != nil {
			t.Fatal(err)
		}
		l.lose("multi", 1)
		if ok, err := q.RemoveID(ctx, id); err != nil || !ok {
			t.Fatalf("RemoveID whose reply was lost = %v, %v; want true", ok, err)
		}
		mustLose(t, l)
		stats(lockrt.QueueStats{Ready: 4, Dead: 1})
		l.lose(d.Scripts.Drain.SHA1, 1)
		got, err := q.Drain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustLose(t, l)
		slices.Sort(got)
		if !slices.Equal(got, []int{1, 2, 4, 5}) {
			t.Fatalf("Drain whose reply was lost = %v, want [1 2 4 5]", got)
		}
		stats(lockrt.QueueStats{Dead: 1})

		// A plain queue's item that does not decode is dead-lettered once.
		pd := queueDef(t, false, 0, 0)
		pq := lockrt.NewQueue(c, pd, lockrt.JSON[int]{}, key(t, "plain"))
		if err := rdb.RPush(ctx, pq.Key(), "not json").Err(); err != nil {
			t.Fatal(err)
		}
		if err := pq.Offer(ctx, 7); err != nil {
			t.Fatal(err)
		}
		l.lose(pd.Scripts.Bury.SHA1, 1)
		if got, err := pq.Drain(ctx); err != nil || !slices.Equal(got, []int{7}) {
			t.Fatalf("Drain = %v, %v; want [7]", got, err)
		}
		mustLose(t, l)
		if st, err := pq.Stats(ctx); err != nil || st != (lockrt.QueueStats{Dead: 1}) {
			t.Fatalf("plain queue stats %+v (%v), want 1 dead letter", st, err)
		}
	})
}

// commandStats returns the calls of every command in INFO commandstats of
// node but the test's own bookkeeping (INFO, CONFIG).
func commandStats(t *testing.T, node *redis.Client) map[string]int64 {
	t.Helper()
	out := cmdCalls(t, node)
	for name := range out {
		if strings.HasPrefix(name, "info") || strings.HasPrefix(name, "config") {
			delete(out, name)
		}
	}
	return out
}

// TestLimiterCommands counts, from INFO commandstats of a node of its
// own, the Redis commands of each limiter call (the scripts preloaded,
// EVALSHA included). A GCRA or token-bucket decision is 4 (EVALSHA,
// TIME, one MGET of the config key and the state, one SET of the state:
// redis_rate's count), a report or a denial 3: the exactly-once records
// cost none (a refund that fills the limiter SETs its record where it
// would have deleted the state), the config check none but on the first
// decision (the config hash and key written: 8) and on one a minute (the
// config key about to expire: HMGET, PEXPIRE, SET, 7). A sliding window's
// decision is 8 (its GET of the config key, 4 commands on its log, the
// log's PEXPIRE), its AllowN(4) too (one ZADD where it was 4), its refund
// 9 (the record a SET of the config key), its first decision 12.
func TestLimiterCommands(t *testing.T) {
	t.Parallel()
	node := ownClient(t)
	for _, a := range []lockrt.LimiterAlgorithm{lockrt.GCRA, lockrt.TokenBucket, lockrt.SlidingWindow} {
		for _, scope := range []lockrt.LimiterScope{lockrt.ScopeOverall, lockrt.ScopePerClient} {
			ctx := withTimeout(t, 30*time.Second)
			c := lockrt.New(node)
			defer c.Close()
			d := limiterDef(t, a, 1, time.Minute, 3, scope) // 4 at once
			if a == lockrt.SlidingWindow {
				d = limiterDef(t, a, 4, time.Minute, 0, scope)
			}
			if err := c.Preload(ctx, d.Scripts.Allow, d.Scripts.Configure); err != nil {
				t.Fatal(err)
			}
			k := key(t, a.String(), scope.String())
			l := c.Limiter(d, k)
			want := map[lockrt.LimiterAlgorithm][]int64{
				lockrt.GCRA:          {8, 4, 4, 3, 4, 4, 4, 3, 6, 3},
				lockrt.TokenBucket:   {8, 4, 4, 3, 4, 4, 4, 3, 6, 3},
				lockrt.SlidingWindow: {12, 8, 8, 6, 9, 8, 8, 7, 9, 6},
			}[a]
			// expire makes the config key read as about to expire, as a
			// minute after its last write.
			expire := func() error {
				v, err := node.Get(ctx, keys.Sub(k, "cfgv")).Result()
				if err != nil {
					return err
				}
				head, _, _ := strings.Cut(v, "|")
				return node.Set(ctx, keys.Sub(k, "cfgv"), head+"|0", time.Minute).Err()
			}
			for i, step := range []struct {
				name string
				f    func() error
			}{
				{"first Allow", func() error { _, err := l.Allow(ctx); return err }},
				{"Allow", func() error { _, err := l.Allow(ctx); return err }},
				{"Allow again", func() error { _, err := l.Allow(ctx); return err }},
				{"AllowN(0)", func() error { _, err := l.AllowN(ctx, 0); return err }},
				{"Refund(1)", func() error { _, err := l.Refund(ctx, 1); return err }},
				{"Refund to full", func() error { _, err := l.Refund(ctx, 2); return err }},
				{"AllowN(4)", func() error { _, err := l.AllowN(ctx, 4); return err }},
				{"denied Allow", func() error { _, err := l.Allow(ctx); return err }},
				{"AllowN(0) as the config key is about to expire", func() error {
					if err := expire(); err != nil {
						return err
					}
					resetStats(t, []*redis.Client{node})
					_, err := l.AllowN(ctx, 0)
					return err
				}},
				{"AllowN(0) after", func() error { _, err := l.AllowN(ctx, 0); return err }},
			} {
				resetStats(t, []*redis.Client{node})
				if err := step.f(); err != nil {
					t.Fatalf("%s %s %s: %v", a, scope, step.name, err)
				}
				st := commandStats(t, node)
				var total int64
				for _, n := range st {
					total += n
				}
				t.Logf("%s %s %s: %d %v", a, scope, step.name, total, st)
				if total != want[i] {
					t.Errorf("%s %s %s: %d commands %v, want %d", a, scope, step.name, total, st, want[i])
				}
			}
		}
	}
}

// TestLimiterLostReplies: limiter calls whose script ran and whose reply
// was lost (go-redis sends it again) have one effect, read by a second
// client of the same id over a connection that loses nothing: k allowed
// requests leave capacity - k, a denial nothing, a refund of one gives
// one back; each call answers what its first run did. A WaitN whose
// reservation's reply was lost goes ahead at its place, reserved once.
// For all three algorithms, one limiter for every client and one per
// client.
func TestLimiterLostReplies(t *testing.T) {
	eachAlgorithm(t, func(t *testing.T, b backend, a lockrt.LimiterAlgorithm) {
		for _, scope := range []lockrt.LimiterScope{lockrt.ScopeOverall, lockrt.ScopePerClient} {
			t.Run(scope.String(), func(t *testing.T) {
				ctx := withTimeout(t, 30*time.Second)
				c, lo, _ := lossyClient(t, b)
				rc := newClientWith(t, b, lockrt.WithID(c.ID()))
				d := limiterDef(t, a, 1, time.Minute, 3, scope) // 4 at once
				if a == lockrt.SlidingWindow {
					d = limiterDef(t, a, 4, time.Minute, 0, scope)
				}
				sha := d.Scripts.Allow.SHA1
				k := key(t)
				l, reader := c.Limiter(d, k), rc.Limiter(d, k)
				left := func(what string, want int) {
					t.Helper()
					if r, err := reader.AllowN(ctx, 0); err != nil || r.Remaining != want {
						t.Fatalf("after %s: %d remaining (%v), want %d", what, r.Remaining, err, want)
					}
				}
				call := func(what string, n int, f func() (lockrt.LimitResult, error), allowed bool, remaining int) {
					t.Helper()
					lo.lose(sha, n)
					r, err := f()
					if err != nil || r.Allowed != allowed || r.Remaining != remaining {
						t.Fatalf("%s whose reply was lost: %+v, %v; want allowed %v, %d remaining", what, r, err, allowed, remaining)
					}
					mustLose(t, lo)
					left(what, remaining)
				}
				call("Allow", 1, func() (lockrt.LimitResult, error) { return l.Allow(ctx) }, true, 3)
				call("Allow", 2, func() (lockrt.LimitResult, error) { return l.Allow(ctx) }, true, 2) // lost twice
				call("AllowN(2)", 1, func() (lockrt.LimitResult, error) { return l.AllowN(ctx, 2) }, true, 0)
				call("denied Allow", 1, func() (lockrt.LimitResult, error) { return l.Allow(ctx) }, false, 0)
				call("Refund(1)", 1, func() (lockrt.LimitResult, error) { return l.Refund(ctx, 1) }, true, 1)
				call("Refund(2)", 1, func() (lockrt.LimitResult, error) { return l.Refund(ctx, 2) }, true, 3)
				call("Allow", 1, func() (lockrt.LimitResult, error) { return l.Allow(ctx) }, true, 2)

				// A reservation: one request a second, the first taken.
				w := limiterDef(t, a, 1, time.Second, 0, scope)
				wk := key(t, "wait")
				wl, wr := c.Limiter(w, wk), rc.Limiter(w, wk)
				if r, err := wl.Allow(ctx); err != nil || !r.Allowed {
					t.Fatalf("Allow: %+v, %v", r, err)
				}
				// Its place is a second away, within the Wait's patience
				// (1.5 s); a second reservation's would be two seconds
				// away, past it: denied, ErrLimited.
				lo.lose(w.Scripts.Allow.SHA1, 1)
				wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
				defer cancel()
				if err := wl.Wait(wctx); err != nil {
					t.Fatalf("Wait whose reply was lost: %v", err)
				}
				mustLose(t, lo)
				// Reserved once, the limiter is full again a second after
				// the reservation's time (now, or before); twice, a second
				// later than that.
				if r, err := wr.AllowN(ctx, 0); err != nil || r.Remaining != 0 || r.ResetAfter > time.Second {
					t.Fatalf("after the Wait: %+v, %v; want none remaining, full within a second", r, err)
				}
			})
		}
	})
}

// TestLimiterDeadlinesWhenUnreachable: against a Redis that accepts
// connections and never answers, every limiter call returns by its
// context's deadline (within deadlineSlack, which the test allows a
// loaded machine; the limiter adds no clean-up wait: it returns when the
// context ends).
func TestLimiterDeadlinesWhenUnreachable(t *testing.T) {
	t.Parallel()
	c := silentClient(t)
	const budget = 500 * time.Millisecond
	for _, a := range []lockrt.LimiterAlgorithm{lockrt.GCRA, lockrt.TokenBucket, lockrt.SlidingWindow} {
		l := c.Limiter(limiterDef(t, a, 4, time.Minute, 3, lockrt.ScopeOverall), key(t, a.String())) // 4 at once
		for name, call := range map[string]func(context.Context) error{
			"Allow":  func(ctx context.Context) error { _, err := l.Allow(ctx); return err },
			"AllowN": func(ctx context.Context) error { _, err := l.AllowN(ctx, 2); return err },
			"Wait":   func(ctx context.Context) error { return l.Wait(ctx) },
			"WaitN":  func(ctx context.Context) error { return l.WaitN(ctx, 2) },
			"Refund": func(ctx context.Context) error { _, err := l.Refund(ctx, 1); return err },
			"Reset":  func(ctx context.Context) error { return l.Reset(ctx) },
		} {
			t.Run(a.String()+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), budget)
				defer cancel()
				start := time.Now()
				err := call(ctx)
				took := time.Since(start)
				t.Logf("returned %v after its %v deadline (%v)", took-budget, budget, err)
				if took > budget+deadlineSlack {
					t.Errorf("returned after %v (%v), want within %v + %v", took, err, budget, deadlineSlack)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err = %v, want one matching context.DeadlineExceeded", err)
				}
			})
		}
	}
}

// TestPlainTakeGivesBack: a plain queue's blocking Take whose caller gave
// up (its wait and cleanUpWait passed) while Redis had not answered puts
// the item its LPOP took later back at the head of the queue: Redis is
// paused (CLIENT PAUSE WRITE) past the wait, then pops the item.
func TestPlainTakeGivesBack(t *testing.T) {
	t.Parallel()
	b := backends()[0]
	ctx := withTimeout(t, 30*time.Second)
	c := newClient(t, b)
	q := lockrt.NewQueue(c, queueDef(t, false, 0, 0), lockrt.JSON[int]{}, key(t))
	if err := q.OfferMany(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Redis().Ping(ctx).Err(); err != nil { // a connection made before the pause
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: single.Addr})
	defer admin.Close()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "client", "pause", 600, "write").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := q.TryTake(ctx, 100*time.Millisecond)
	if !errors.Is(err, lockrt.ErrEmpty) {
		t.Fatalf("TryTake during the pause = %v, want ErrEmpty", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond+deadlineSlack {
		t.Errorf("TryTake returned after %v", took)
	}
	// The pause ends, the LPOP pops 1, and the runtime gives it back.
	eventually(t, failAfter, func() bool { return cmdCalls(t, admin)["lpop"] >= 1 }, "the LPOP did not run after the pause")
	eventually(t, failAfter, func() bool {
		vs, err := q.PeekN(ctx, 3)
		return err == nil && slices.Equal(vs, []int{1, 2})
	}, "the item taken after the caller gave up did not come back first")
}

// TestScriptPins: generated code pins the runtime's scripts by SHA1. Pins
// that match give the runtime's own scripts and everything works; a pin
// that does not (the runtime was upgraded, the code not regenerated)
// fails every call of the objects built on them, and Preload, with
// ErrScriptMismatch naming the script and the regenerate command, and
// sends nothing to Redis.
func TestScriptPins(t *testing.T) {
	t.Parallel()
	b := backends()[0]
	ctx := withTimeout(t, 20*time.Second)
	c := newClient(t, b)
	own := lockimpl.Scripts()
	pins := lockimpl.Pins{}
	for _, s := range own.All() {
		pins[s.Name] = s.SHA1
	}
	good := lockimpl.Pin(pins)
	if err := good.Err(); err != nil {
		t.Fatal(err)
	}
	d := &lockrt.LockDef{Name: "Pinned", Kind: lockrt.Reentrant, Lease: time.Minute, Scripts: good.Locks(lockrt.Reentrant)}
	le, err := c.Lock(d, key(t, "good")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := le.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lockimpl.Preload(ctx, c, good.All()...); err != nil {
		t.Fatal(err)
	}

	pins["reentrant_acquire"] = strings.Repeat("0", 40)
	stale := lockimpl.Pin(pins)
	if !errors.Is(stale.Err(), lockrt.ErrScriptMismatch) {
		t.Fatalf("a stale pin: %v, want ErrScriptMismatch", stale.Err())
	}
	h := &cmdLog{}
	c.Redis().AddHook(h)
	d = &lockrt.LockDef{Name: "Stale", Kind: lockrt.Reentrant, Lease: time.Minute, Scripts: stale.Locks(lockrt.Reentrant)}
	_, err = c.Lock(d, key(t, "stale")).Lock(ctx)
	if !errors.Is(err, lockrt.ErrScriptMismatch) || !strings.Contains(err.Error(), "reentrant_acquire") || !strings.Contains(err.Error(), "go generate") {
		t.Fatalf("Lock with a stale pin: %v, want ErrScriptMismatch naming the script and the regenerate command", err)
	}
	q := lockimpl.NewReliableQueue(c, &lockrt.QueueDef{Name: "Stale", Reliable: true, Visibility: time.Second, MaxDeliveries: 1, Scripts: stale.Queues()}, lockrt.JSON[int]{}, key(t, "queue"))
	if _, err := q.Offer(ctx, 1); !errors.Is(err, lockrt.ErrScriptMismatch) {
		t.Fatalf("Offer with a stale pin set: %v, want ErrScriptMismatch", err)
	}
	if err := lockimpl.Preload(ctx, c, stale.All()...); !errors.Is(err, lockrt.ErrScriptMismatch) {
		t.Fatalf("Preload with a stale pin: %v, want ErrScriptMismatch", err)
	}
	if cmds := h.take(); len(cmds) != 0 {
		t.Errorf("calls with a stale pin sent %v", cmds)
	}
	if err := lockimpl.Pin(lockimpl.Pins{"no_such_script": "x"}).Err(); !errors.Is(err, lockrt.ErrScriptMismatch) {
		t.Errorf("a pin of a script the runtime does not have: %v", err)
	}
}

// TestTrySetCountLostReply: a latch's TrySetCount whose SETNX ran and
// whose reply was lost (go-redis sends it again, and the second run finds
// the key set) reports that it set the count; before, it reported false.
func TestTrySetCountLostReply(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		c, l, _ := lossyClient(t, b)
		k := key(t)
		lt := c.Latch(latchDef(t, 3, time.Minute), k)
		l.lose(k, 1) // the first command that names the key: SET NX PX
		if set, err := lt.TrySetCount(ctx, 7); err != nil || !set {
			t.Fatalf("TrySetCount whose reply was lost = %v, %v; want true", set, err)
		}
		mustLose(t, l)
		if n, err := lt.Count(ctx); err != nil || n != 7 {
			t.Fatalf("count %d (%v), want 7", n, err)
		}
		if set, err := lt.TrySetCount(ctx, 9); err != nil || set {
			t.Fatalf("a second TrySetCount = %v, %v; want false", set, err)
		}
	})
}

// TestForceUnlockLostReply: a ForceUnlock whose reply was lost (go-redis
// sends it again, and the second run finds the lock gone) reports the lock
// held, and the lock is free; before, it reported false.
func TestForceUnlockLostReply(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		c, l, _ := lossyClient(t, b)
		d := def(t, lockrt.Reentrant, time.Minute, false, 0)
		k := key(t)
		if _, err := newClient(t, b).Lock(d, k).Lock(ctx); err != nil {
			t.Fatal(err)
		}
		lk := c.Lock(d, k)
		l.lose(d.Scripts.ForceUnlock.SHA1, 1)
		if held, err := lk.ForceUnlock(ctx); err != nil || !held {
			t.Fatalf("ForceUnlock whose reply was lost = %v, %v; want true", held, err)
		}
		mustLose(t, l)
		if locked, err := lk.IsLocked(ctx); err != nil || locked {
			t.Fatalf("still locked after ForceUnlock (%v)", err)
		}
	})
}

// TestCompactHandoffLostReply: a release that hands a compact hold on (a
// read-write lock's write hold, a semaphore's one permit: see
// templates/rw.luainc and sem.luainc) and whose reply was lost runs
// again and finds the hold handed to the waiter: the release returns
// nil, the waiter gets the lock once, and its release leaves no key of
// the object behind (a semaphore's counts went only when their TTL ran
// out, before: its release found the queue empty and kept them).
func TestCompactHandoffLostReply(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c, l, _ := lossyClient(t, b)
		other := newClient(t, b)
		rdb := b.new()
		t.Cleanup(func() { rdb.Close() })
		rw := def(t, lockrt.ReadWrite, 5*time.Second, true, time.Minute)
		sd := semDef(t, 1, 5*time.Second, true, time.Minute)
		for _, tc := range []struct {
			name    string
			k       string
			hold    func(c *lockrt.Client, k string) (func(context.Context) error, error)
			single  string // the key whose field "s" names the compact hold
			pattern func(k string) string
		}{
			{"rw", key(t, "rw"), func(c *lockrt.Client, k string) (func(context.Context) error, error) {
				le, err := c.RWLock(rw, k).Write().Lock(ctx)
				if err != nil {
					return nil, err
				}
				return le.Unlock, nil
			}, "", func(string) string { return rw.Scripts.Release.SHA1 }},
			{"semaphore", key(t, "sem"), func(c *lockrt.Client, k string) (func(context.Context) error, error) {
				p, err := c.Semaphore(sd, k).Acquire(ctx, 1)
				if err != nil {
					return nil, err
				}
				return p.Release, nil
			}, "counts", func(k string) string { return keys.Sub(k, "waiters") }}, // the whole release, not its trimmed first call
		} {
			t.Run(tc.name, func(t *testing.T) {
				single := tc.k
				if tc.single != "" {
					single = keys.Sub(tc.k, tc.single)
				}
				release, err := tc.hold(c, tc.k)
				if err != nil {
					t.Fatal(err)
				}
				got := inBackground(t, func() (func(context.Context) error, error) { return tc.hold(other, tc.k) })
				waitRegistered(t, rdb, tc.k, 1)
				l.lose(tc.pattern(tc.k), 1)
				if err := release(ctx); err != nil {
					t.Fatalf("a release that handed on, its reply lost: %v", err)
				}
				mustLose(t, l)
				waiterRelease := <-got
				if waiterRelease == nil {
					t.Fatal("the waiter did not get the lock")
				}
				holds := keys.Sub(tc.k, "holds")
				if tc.name == "semaphore" {
					holds = tc.k
				}
				if err := waiterRelease(ctx); err != nil {
					t.Fatal(err)
				}
				if n, err := rdb.Exists(ctx, tc.k, single, holds).Result(); err != nil || n != 0 {
					t.Errorf("%d of the object's keys left after the waiter's release (%v): %v", n, err, rdb.HGetAll(ctx, single).Val())
				}
			})
		}
	})
}

// TestLeaveLostReply: a waiter that gives up leaves with the release
// script (its "leaving" argument); when that call's reply is lost and
// go-redis sends it again, the second run finds the entry gone and
// changes nothing. Read from Redis: the registry is empty, the holder
// still holds, and its release hands the object to nobody. For a fair
// lock (whose leave takes a registered waiter's entry out without
// reading the hash) and a semaphore of one permit (whose leave with
// nothing free hands nothing on).
func TestLeaveLostReply(t *testing.T) {
	ctx := context.Background()
	fair := def(t, lockrt.Fair, 30*time.Second, true, time.Minute)
	sem := semDef(t, 1, 30*time.Second, true, time.Minute)
	type take = func(c *lockrt.Client, k string, ctx context.Context) (func(context.Context) error, error)
	cases := []struct {
		name    string
		release string
		take    take
		free    func(rdb redis.UniversalClient, k string) bool
	}{
		{"fair", fair.Scripts.Release.SHA1, func(c *lockrt.Client, k string, ctx context.Context) (func(context.Context) error, error) {
			le, err := c.Lock(fair, k).Lock(ctx)
			if err != nil {
				return nil, err
			}
			return le.Unlock, nil
		}, func(rdb redis.UniversalClient, k string) bool { return rdb.Exists(ctx, k).Val() == 0 }},
		{"semaphore", sem.Scripts.Release.SHA1, func(c *lockrt.Client, k string, ctx context.Context) (func(context.Context) error, error) {
			p, err := c.Semaphore(sem, k).Acquire(ctx, 1)
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		}, func(rdb redis.UniversalClient, k string) bool {
			return rdb.HGet(ctx, keys.Sub(k, "counts"), "*").Val() == ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := backends()[0]
			c, l, rdb := lossyClient(t, b)
			k := key(t)
			release, err := tc.take(newClient(t, b), k, ctx)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := tc.take(c, k, wctx)
				done <- err
			}()
			waitQueued(t, rdb, k, 1)
			l.lose(tc.release, 1)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the waiter: %v, want context.Canceled", err)
			}
			waitQueued(t, rdb, k, 0)
			eventually(t, failAfter, func() bool { return l.left() == 0 }, "the leave's reply was not lost: it did not run the release script")
			if n := rdb.ZCard(ctx, keys.Sub(k, "waiters")).Val(); n != 0 {
				t.Errorf("%d entries left in the registry's deadlines, want 0", n)
			}
			if tc.free(rdb, k) {
				t.Fatal("the holder's hold is gone after the waiter's leave")
			}
			if err := release(ctx); err != nil {
				t.Fatalf("the holder's release: %v", err)
			}
			if !tc.free(rdb, k) {
				t.Error("the holder's release handed the object on: to the waiter that left")
			}
		})
	}
}
