package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// stamped is a delayed item: its index and when it was offered, on the
// test's clock (the same as the server's: both run on this machine).
type stamped struct {
	I       int
	Offered time.Time
	Delay   time.Duration
}

// TestDelayedDelivery: items with random delays of 0-2s, offered by one
// client and taken by two whose timers race, are each delivered once, no
// earlier than due and within milliseconds after.
func TestDelayedDelivery(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const n = 300
		d, k := queueDef(t, true, 0, 0), key(t)
		ctx := withTimeout(t, 30*time.Second)
		type got struct {
			v  stamped
			at time.Time
		}
		deliveries := make(chan got, 2*n)
		tctx, stop := context.WithCancel(ctx)
		defer stop()
		var wg sync.WaitGroup
		for range 2 {
			q := lockrt.NewDelayedQueue(newClient(t, b), d, lockrt.JSON[stamped]{}, k)
			if err := q.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						v, err := q.Take(tctx)
						if err != nil {
							if !errors.Is(err, context.Canceled) {
								t.Error(err)
							}
							return
						}
						deliveries <- got{v, time.Now()}
					}
				}()
			}
		}
		p := lockrt.NewDelayedQueue(newClient(t, b), d, lockrt.JSON[stamped]{}, k)
		for i := range n {
			delay := time.Duration(rand.Int64N(int64(2 * time.Second)))
			v := stamped{I: i, Offered: time.Now(), Delay: delay}
			var err error
			if i%2 == 0 {
				err = p.OfferIn(ctx, v, delay)
			} else {
				err = p.OfferAt(ctx, v, v.Offered.Add(delay))
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Millisecond)
		}
		seen := make([]bool, n)
		var late []time.Duration
		for range n {
			select {
			case g := <-deliveries:
				due := g.v.Offered.Add(g.v.Delay)
				if seen[g.v.I] {
					t.Errorf("item %d delivered twice", g.v.I)
				}
				seen[g.v.I] = true
				if g.at.Before(due) {
					t.Errorf("item %d delivered %v before due", g.v.I, due.Sub(g.at))
				}
				late = append(late, g.at.Sub(due))
			case <-ctx.Done():
				t.Fatalf("only %d of %d items delivered", len(late), n)
			}
		}
		stop()
		wg.Wait()
		slices.Sort(late)
		p50, p99 := late[len(late)/2], late[len(late)*99/100]
		t.Logf("lateness after due: p50 %v, p99 %v, max %v", p50, p99, late[len(late)-1])
		// A behavioural bound, generous for a loaded machine and -race
		// (the benchmark measures the real numbers): delivery is driven
		// by timers, not by polling every second.
		if costsChecked && p99 > 500*time.Millisecond {
			t.Errorf("p99 lateness %v; the timer does not fire on time", p99)
		}
		select {
		case g := <-deliveries:
			t.Errorf("item %d delivered twice", g.v.I)
		default:
		}
	})
}

// TestDelayedSurvivesClients: items come due while no client runs; the
// next client to start delivers them.
func TestDelayedSurvivesClients(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		d, k := queueDef(t, true, 0, 0), key(t)
		rdb := b.new()
		first := lockrt.New(rdb)
		q := lockrt.NewDelayedQueue(first, d, lockrt.JSON[int]{}, k)
		for i := range 50 {
			if err := q.OfferIn(ctx, i, time.Duration(100+i)*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		first.Close() // every client stops
		rdb.Close()
		time.Sleep(400 * time.Millisecond) // the items' due times (100-149ms) pass with no client running

		q = lockrt.NewDelayedQueue(newClient(t, b), d, lockrt.JSON[int]{}, k)
		start := time.Now()
		if err := q.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if st, err := q.Stats(ctx); err != nil || st != (lockrt.QueueStats{Ready: 50}) {
			t.Fatalf("after Start: %+v, %v; want 50 ready", st, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Start took %v", d)
		}
		var got []int
		for range 50 {
			v, err := q.TryTake(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if !slices.IsSorted(got) {
			t.Errorf("items came in the order %v, want due order", got)
		}
	})
}

// TestDelayedTimerDoesNotPoll: a client serving a delayed queue sends
// nothing while nothing is due, and runs its move about once per due
// item when items come due.
func TestDelayedTimerDoesNotPoll(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := withTimeout(t, 20*time.Second)
		d, k := queueDef(t, true, 0, 0), key(t)
		rdb := b.new()
		defer rdb.Close()
		c := lockrt.New(rdb)
		defer c.Close()
		q := lockrt.NewDelayedQueue(c, d, lockrt.JSON[int]{}, k)
		if err := q.Start(ctx); err != nil {
			t.Fatal(err)
		}
		h := &cmdLog{}
		rdb.AddHook(h)
		time.Sleep(time.Second) // a quiet window: a poller would have sent something
		if cmds := h.take(); len(cmds) != 0 {
			t.Errorf("an idle timer sent %v", cmds)
		}
		// Another client offers three items due in 300, 600, 900ms.
		p := lockrt.NewDelayedQueue(newClient(t, b), d, lockrt.JSON[int]{}, k)
		for i := 1; i <= 3; i++ {
			if err := p.OfferIn(ctx, i, time.Duration(i)*300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		// All three moved (asked through the other client, which h does
		// not count).
		eventually(t, failAfter, func() bool { n, err := p.Len(ctx); return err == nil && n == 3 }, "the three items did not come due")
		// The other client's timer may have moved the last item: this
		// one's, armed for the same due time, still runs its move.
		eventually(t, failAfter, func() bool { return !c.TimerBusy() }, "the timer kept a move due after everything moved")
		moves := len(h.take())
		if moves < 3 || moves > 8 {
			t.Errorf("the timer ran %d moves for 3 items due at different times, want 3 to 8", moves)
		}
		if n, err := q.Len(ctx); err != nil || n != 3 {
			t.Errorf("Len = %d, %v; want 3", n, err)
		}
		h.take()
		time.Sleep(time.Second) // a quiet window, as above
		if cmds := h.take(); len(cmds) != 0 {
			t.Errorf("a timer with nothing due sent %v", cmds)
		}
	})
}

// TestKeyedQueuesBounded: a client serving 2 000 keyed delayed reliable
// queues runs O(1) goroutines for them (one scheduler, not a timer per
// key), drops every queue's channel once the queue is idle, and leaves no
// key of its own making without a TTL: seq, armed and the offers' and
// claims' records expire, and the
// queue's other keys are gone once it is empty.
func TestKeyedQueuesBounded(t *testing.T) {
	const keys = 2000
	b := backends()[0]
	ctx := withTimeout(t, 2*time.Minute)
	admin := b.new()
	defer admin.Close()
	base := goruntime.NumGoroutine()

	rdb := b.new()
	defer rdb.Close()
	c := lockrt.New(rdb)
	defer c.Close()
	// A short visibility: a queue with a delivery in flight stays served
	// until its deadline has passed (the move then finds nothing due).
	d := queueDef(t, true, 2*time.Second, 3)
	qs := make([]*lockrt.DelayedReliableQueue[int], keys)
	for i := range qs {
		qs[i] = lockrt.NewDelayedReliableQueue(c, d, lockrt.JSON[int]{}, key(t, strconv.Itoa(i)))
		if _, err := qs[i].OfferIn(ctx, i, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	pattern := key(t, "*") + "*"
	channels := func() int {
		n, err := admin.PubSubChannels(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(n)
	}
	ttls := func(when string) (kinds map[string]int) {
		kinds = map[string]int{}
		iter := admin.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			suffix := k[strings.LastIndexByte(k, ':')+1:]
			if strings.HasSuffix(k, "}") {
				suffix = "ready"
			} else if strings.Contains(k, "}:op:") { // an offer's or a claim's record
				suffix = "op"
			}
			kinds[suffix]++
			ttl, err := admin.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			switch suffix {
			case "seq": // 10s after its last id
				if ttl == -1 || ttl > 10*time.Second {
					t.Errorf("%s: %s has TTL %v, want one of at most 10s", when, k, ttl)
				}
			case "op": // as long as the record is needed
				if ttl == -1 || ttl > lockrt.OfferRecordTTL {
					t.Errorf("%s: %s has TTL %v, want one of at most %v", when, k, ttl, lockrt.OfferRecordTTL)
				}
			case "armed": // 1s after the due time it records
				if ttl == -1 || ttl > 3*time.Second {
					t.Errorf("%s: %s has TTL %v, want one of at most 3s", when, k, ttl)
				}
			default: // durable state: removed when empty
				if ttl != -1 && ttl != -2*time.Nanosecond {
					t.Errorf("%s: %s has TTL %v", when, k, ttl)
				}
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		return kinds
	}

	// Each queue's subscription is made by a goroutine of its own until
	// the server confirms it: settled, the client runs O(1) goroutines (a
	// timer per queue would keep 2 000). On a loaded machine 23 were still
	// confirming when this was read at once.
	goroutines := 0
	eventually(t, failAfter, func() bool {
		goroutines = goruntime.NumGoroutine() - base
		return goroutines <= 20
	}, fmt.Sprintf("more than 20 goroutines for %d keyed queues, want O(1)", keys))
	t.Logf("with %d delayed items in %d queues: %d goroutines, %d channels, keys %v",
		keys, keys, goroutines, channels(), ttls("delayed"))

	// Consumers take and acknowledge every item once it is due.
	for i, q := range qs {
		dl, err := q.TryTake(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("queue %d: %v", i, err)
		}
		if dl.Value != i {
			t.Fatalf("queue %d delivered %d", i, dl.Value)
		}
		if err := dl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	goroutines = goruntime.NumGoroutine() - base
	t.Logf("after taking and acknowledging: %d goroutines, %d channels, keys %v", goroutines, channels(), ttls("acknowledged"))
	if goroutines > 20 {
		t.Errorf("%d goroutines for %d keyed queues, want O(1)", goroutines, keys)
	}

	// Idle queues are forgotten and their channels dropped.
	var n int
	within(failAfter+lockrt.HubLinger, func() bool { n = channels(); return n == 0 }) // forgotten, then the hub's linger
	subs, err := admin.PubSubNumSub(ctx, key(t, "0")+":ch", key(t, "1999")+":ch").Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle: %d goroutines, %d channels, numsub %v", goruntime.NumGoroutine()-base, n, subs)
	if n != 0 {
		t.Errorf("%d channels still subscribed after every queue went idle", n)
	}
	for ch, s := range subs {
		if s != 0 {
			t.Errorf("%s has %d subscribers after its queue went idle", ch, s)
		}
	}
	if kinds := ttls("idle"); kinds["ready"]+kinds["data"]+kinds["delayed"]+kinds["inflight"]+kinds["att"] != 0 {
		t.Errorf("keys left by empty queues: %v", kinds)
	}
}
