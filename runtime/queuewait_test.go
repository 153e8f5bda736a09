package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/scripts/redistest"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// takesPool is the pool size of the client whose Takes outnumber it.
const takesPool = 4

// TestTakesHoldNoConnections: 40 blocking Takes of one client, ten times
// its pool, hold no pool connection while they wait (go-redis'
// PoolStats: none in use, none ever waited for), and every one gets an
// item; an offer of k items wakes k of them, one PUBLISH each (no herd),
// while the others stay registered. For a plain, a reliable and keyed
// delayed queues (one Take each).
func TestTakesHoldNoConnections(t *testing.T) {
	t.Parallel()
	const n = 10 * takesPool
	node := redistest.Single(t)
	admin := node.Client()
	defer admin.Close()
	ctx := withTimeout(t, 60*time.Second)
	for _, kind := range []string{"plain", "reliable", "delayed"} {
		t.Run(kind, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: node.Addr, PoolSize: takesPool})
			c := lockrt.New(rdb)
			defer func() { c.Close(); rdb.Close() }()
			producer := newClientOf(t, node.Addr)
			k := key(t)
			var take func(i int) (int, error)
			var offer func(i ...int) error
			keyOf := func(int) string { return k }
			switch kind {
			case "plain":
				d := queueDef(t, false, 0, 0)
				q := lockrt.NewQueue(c, d, lockrt.JSON[int]{}, k)
				take = func(int) (int, error) { return q.Take(ctx) }
				p := lockrt.NewQueue(producer, d, lockrt.JSON[int]{}, k)
				offer = func(is ...int) error { return p.OfferMany(ctx, is...) }
			case "reliable":
				d := queueDef(t, false, time.Minute, 3)
				q := lockrt.NewReliableQueue(c, d, lockrt.JSON[int]{}, k)
				take = func(int) (int, error) {
					dl, err := q.Take(ctx)
					if err != nil {
						return 0, err
					}
					return dl.Value, dl.Ack(ctx)
				}
				p := lockrt.NewReliableQueue(producer, d, lockrt.JSON[int]{}, k)
				offer = func(is ...int) error { _, err := p.OfferMany(ctx, is...); return err }
			case "delayed": // keyed: a queue per Take, each item due in 50ms
				d := queueDef(t, true, 0, 0)
				keyOf = func(i int) string { return fmt.Sprintf("%s:%d", k, i) }
				take = func(i int) (int, error) {
					return lockrt.NewDelayedQueue(c, d, lockrt.JSON[int]{}, keyOf(i)).Take(ctx)
				}
				offer = func(is ...int) error {
					for _, i := range is {
						if err := lockrt.NewDelayedQueue(producer, d, lockrt.JSON[int]{}, keyOf(i)).OfferIn(ctx, i, 50*time.Millisecond); err != nil {
							return err
						}
					}
					return nil
				}
			}
			got := make(chan int, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					v, err := take(i)
					if err != nil {
						t.Error(err)
						return
					}
					got <- v
				})
			}
			if kind == "delayed" {
				for i := range n {
					waitTakers(t, rdb, keyOf(i), 1)
				}
			} else {
				waitTakers(t, rdb, k, n)
			}
			if kind != "plain" { // its first move, for the Takes that serve the queue
				eventually(t, failAfter, func() bool { return !c.TimerMoving() }, "the delay timer kept moving")
			}
			// The last registrations' replies may still be on their way:
			// then no connection stays in use (a blocking command would
			// hold one per Take).
			eventually(t, failAfter, func() bool {
				st := rdb.PoolStats()
				return st.TotalConns == st.IdleConns
			}, fmt.Sprintf("pool connections stayed in use while %d Takes wait", n))
			if kind != "delayed" {
				// k items wake k Takes, one PUBLISH each.
				resetStats(t, []*redis.Client{admin})
				if err := offer(0, 1, 2); err != nil {
					t.Fatal(err)
				}
				for range 3 {
					<-got
				}
				want := int64(3)
				if kind == "reliable" {
					want++ // the first claim announces its visibility deadline to the delay timers
				}
				if p := commandCalls(t, []*redis.Client{admin}, "publish"); p != want {
					t.Errorf("an offer of 3 items to %d waiting Takes: %d PUBLISH, want %d", n, p, want)
				}
				waitTakers(t, rdb, k, n-3)
				if err := offer(func() []int {
					var is []int
					for i := 3; i < n; i++ {
						is = append(is, i)
					}
					return is
				}()...); err != nil {
					t.Fatal(err)
				}
			} else {
				is := make([]int, n)
				for i := range is {
					is[i] = i
				}
				if err := offer(is...); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			close(got)
			seen := map[int]bool{}
			for v := range got {
				seen[v] = true
			}
			if kind != "delayed" && len(seen) != n-3 || kind == "delayed" && len(seen) != n {
				t.Errorf("%d distinct items taken", len(seen))
			}
			if st := rdb.PoolStats(); st.Timeouts != 0 || st.TotalConns > takesPool {
				t.Errorf("pool: %d connections, %d timeouts waiting for one", st.TotalConns, st.Timeouts)
			}
		})
	}
}

// newClientOf returns a runtime client of its own on addr, closed when t
// ends.
func newClientOf(t testing.TB, addr string) *lockrt.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c := lockrt.New(rdb)
	t.Cleanup(func() { c.Close(); rdb.Close() })
	return c
}

// tripHook counts a client's round trips (a pipeline is one) and the
// commands they carry.
type tripHook struct {
	trips, cmds atomic.Int64
	mu          sync.Mutex
	names       map[string]int
}

func (h *tripHook) count(cmd redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names == nil {
		h.names = map[string]int{}
	}
	name := cmd.Name()
	if name == "evalsha" {
		name += " " + fmt.Sprint(cmd.Args()[1])[:6]
	}
	h.names[name]++
}

func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(1)
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

// TestTakesStartTogether: Takes that start at once on one client, on as
// many keyed delayed queues, send their calls together: each Take's
// take, which registers it when it takes nothing (one call), and its
// queue's first move by the delay timer (2 commands a Take) go in shared
// pipelines (rdb.Lane), in fewer round
// trips than a third of the Takes, on at most 8 pool connections (two
// per lane: takes, registrations, moves, offers); and offers made at
// once to those queues go together too, and every Take gets its item.
func TestTakesStartTogether(t *testing.T) {
	t.Parallel()
	const n = 300
	node := redistest.Single(t)
	ctx := withTimeout(t, 60*time.Second)
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	h := &tripHook{}
	rdb.AddHook(h)
	c := lockrt.New(rdb)
	defer func() { c.Close(); rdb.Close() }()
	d := queueDef(t, true, 0, 0)
	if err := c.Preload(ctx, d.Scripts.Offer, d.Scripts.Move, d.Scripts.Pop, d.Scripts.Wait); err != nil {
		t.Fatal(err)
	}
	k := key(t)
	keyOf := func(i int) string { return fmt.Sprintf("%s:%d", k, i) }
	trips0, cmds0 := h.trips.Load(), h.cmds.Load()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v, err := lockrt.NewDelayedQueue(c, d, lockrt.JSON[int]{}, keyOf(i)).Take(ctx)
			if err != nil || v != i {
				t.Errorf("Take %d: %d, %v", i, v, err)
			}
		})
	}
	admin := node.Client() // (its polling is not counted)
	defer admin.Close()
	for i := range n {
		waitTakers(t, admin, keyOf(i), 1)
	}
	eventually(t, failAfter, func() bool { return !c.TimerMoving() }, "the delay timer kept moving")
	// Each Take's take-or-register and its queue's first move: 2
	// commands, in shared pipelines (and a few connections' set-up).
	trips, cmds := h.trips.Load()-trips0, h.cmds.Load()-cmds0
	t.Logf("%d Takes starting at once: %d commands in %d round trips", n, cmds, trips)
	// How many calls share a pipeline depends on how the goroutines are
	// scheduled: the bound on round trips holds in the cost tests (-tags
	// costs, make costs), not on a machine busy with other suites (116 at
	// load 10 here, 34-42 at rest).
	if cmds < 2*n || costsChecked && trips > n/3 {
		t.Errorf("%d Takes starting at once: %d commands in %d round trips, want at least %d commands in at most %d (%v)", n, cmds, trips, 2*n, n/3, h.names)
	}
	if conns := rdb.PoolStats().TotalConns; conns > 8 {
		t.Errorf("%d pool connections, want at most 8 (two per lane)", conns)
	}
	trips0 = h.trips.Load()
	var owg sync.WaitGroup
	for i := range n {
		owg.Go(func() {
			if err := lockrt.NewDelayedQueue(c, d, lockrt.JSON[int]{}, keyOf(i)).OfferIn(ctx, i, 50*time.Millisecond); err != nil {
				t.Error(err)
			}
		})
	}
	owg.Wait()
	wg.Wait()
	// Each offer, its queue's due move and the woken Take's LPOP.
	trips = h.trips.Load() - trips0
	t.Logf("%d offers at once, their moves and takes: %d round trips", n, trips)
	if costsChecked && trips > n {
		t.Errorf("%d offers made at once, their due moves and takes: %d round trips, want at most %d (%v)", n, trips, n, h.names)
	}
}

// TestTakersRefreshedPerClient: Takes waiting on a queue cost nothing per
// second (their client refreshes their entries in one call per queue every
// QueueWaiterTTL/3); a refresh that finds their entries gone and an item
// ready (its wake-up was lost) wakes them, one takes the item and the
// others register again.
func TestTakersRefreshedPerClient(t *testing.T) {
	t.Parallel()
	const n = 20
	node := redistest.Single(t)
	admin := node.Client()
	defer admin.Close()
	ctx := withTimeout(t, 60*time.Second)
	c := newClientOf(t, node.Addr)
	producer := newClientOf(t, node.Addr)
	d := queueDef(t, false, 0, 0)
	k := key(t)
	q := lockrt.NewQueue(c, d, lockrt.JSON[int]{}, k)
	got := make(chan int, n)
	for range n {
		go func() {
			v, err := q.TryTake(ctx, 50*time.Second)
			if err == nil {
				got <- v
			}
		}()
	}
	waitTakers(t, admin, k, n)
	resetStats(t, []*redis.Client{admin})
	// Less than a refresh period (QueueWaiterTTL/3, less a tenth at
	// random): nothing is sent for the waiting Takes meanwhile.
	time.Sleep(lockrt.QueueWaiterTTL / 3 * 6 / 10)
	if calls := commandCalls(t, []*redis.Client{admin}, "evalsha"); calls != 0 {
		t.Errorf("%d Takes waiting: %d scripts in %v, want none", n, calls, lockrt.QueueWaiterTTL/3*6/10)
	}
	// The entries are lost, and so is the offer's wake-up.
	if err := admin.Del(ctx, k+":takers").Err(); err != nil {
		t.Fatal(err)
	}
	if err := lockrt.NewQueue(producer, d, lockrt.JSON[int]{}, k).Offer(ctx, 7); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		if v != 7 {
			t.Errorf("took %d, want 7", v)
		}
	case <-time.After(lockrt.QueueWaiterTTL / 3 * 2): // the client's next refresh
		t.Fatal("the item whose wake-up was lost was not taken after a refresh")
	}
	waitTakers(t, admin, k, n-1)
}
