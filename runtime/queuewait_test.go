package runtime_test

import (
	"fmt"
	"sync"
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
