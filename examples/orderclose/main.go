// Command orderclose is lockgen's queue demo, the order-closing scenario:
// an order that is still unpaid 30 minutes after it was created is
// closed. Creating an order offers a close request due then to a
// generated, typed, delayed reliable queue; workers on other clients take
// requests when due, close the orders that are still unpaid, and
// acknowledge. No worker polls: the delay timer fires at the due time.
//
// The demo shortens 30 minutes to 2 seconds. It runs against the Redis at
// $REDIS_ADDR, or else starts a redis-server of its own (it must be in
// PATH).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/examples/orderclose/orders"
	"github.com/lockgen/lockgen/examples/orderclose/shopqueues"
	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// closeAfter is how long an order may stay unpaid: 30*time.Minute in the
// shop, shortened for the demo.
const closeAfter = 2 * time.Second

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

// shop is the demo's order database.
type shop struct {
	mu     sync.Mutex
	paid   map[int64]bool
	closed map[int64]time.Duration // order -> how late after due it was closed
}

func (s *shop) pay(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paid[id] = true
}

// closeUnpaid closes the order unless it was paid, and reports whether it
// closed it.
func (s *shop) closeUnpaid(req orders.CloseRequest) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paid[req.OrderID] {
		return false
	}
	s.closed[req.OrderID] = time.Since(req.CreatedAt.Add(closeAfter))
	return true
}

func run(ctx context.Context) error {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		n, err := redistest.Start()
		if err != nil {
			return err
		}
		defer n.Close()
		addr = n.Addr
		fmt.Println("using a redis-server of its own (set REDIS_ADDR to use yours)")
	}
	// Each client stands for one process of the shop.
	newClient := func() (*lockrt.Client, func()) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		c := lockrt.New(rdb)
		return c, func() { c.Close(); rdb.Close() }
	}
	db := &shop{paid: map[int64]bool{}, closed: map[int64]time.Duration{}}

	fmt.Println("== the web process creates orders; two workers close unpaid ones when due")
	web, closeWeb := newClient()
	defer closeWeb()
	if err := shopqueues.Preload(ctx, web); err != nil {
		return err
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, name := range []string{"worker-a", "worker-b"} {
		c, closeC := newClient()
		defer closeC()
		queues := shopqueues.NewQueues(c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := work(wctx, name, queues, db); err != nil {
				errs <- err
			}
		}()
	}
	queues := shopqueues.NewQueues(web)
	for id := int64(1); id <= 4; id++ {
		req := orders.CloseRequest{OrderID: id, CreatedAt: time.Now()}
		if _, err := queues.OrderClose().OfferIn(ctx, req, closeAfter); err != nil {
			return err
		}
		say("order %d created; close request due in %v", id, closeAfter)
		time.Sleep(200 * time.Millisecond)
	}
	db.pay(2)
	say("order 2 paid")
	time.Sleep(closeAfter + 500*time.Millisecond)
	stopWorkers()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}

	fmt.Println("== every process stops while a request comes due; the next one to start delivers it")
	if _, err := queues.OrderClose().OfferIn(ctx, orders.CloseRequest{OrderID: 5, CreatedAt: time.Now()}, closeAfter); err != nil {
		return err
	}
	say("order 5 created")
	closeWeb() // the web process stops too: no client runs a timer
	time.Sleep(closeAfter + 300*time.Millisecond)
	c, closeC := newClient()
	defer closeC()
	late := shopqueues.NewQueues(c)
	if err := late.OrderClose().Start(ctx); err != nil {
		return err
	}
	say("a worker starts")
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := late.OrderClose().Take(tctx)
	if err != nil {
		return fmt.Errorf("the request that came due while every client was down: %w", err)
	}
	if db.closeUnpaid(d.Value) {
		say("worker-c closed order %d, which came due while nothing ran", d.Value.OrderID)
	}
	if err := d.Ack(ctx); err != nil {
		return err
	}
	return db.check()
}

// work takes close requests until ctx ends.
func work(ctx context.Context, name string, queues *shopqueues.Queues, db *shop) error {
	for {
		d, err := queues.OrderClose().Take(ctx)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		req := d.Value
		due := req.CreatedAt.Add(closeAfter)
		if time.Now().Before(due) {
			return fmt.Errorf("%s got the request of order %d %v before it was due", name, req.OrderID, time.Until(due))
		}
		if db.closeUnpaid(req) {
			say("%s closed order %d, %v after it was due", name, req.OrderID, time.Since(due).Round(100*time.Microsecond))
		} else {
			say("%s: order %d was paid; nothing to do", name, req.OrderID)
		}
		if err := d.Ack(ctx); err != nil {
			return err
		}
	}
}

// check says whether the right orders were closed.
func (s *shop) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range []int64{1, 3, 4, 5} {
		if _, ok := s.closed[id]; !ok {
			return fmt.Errorf("unpaid order %d was not closed", id)
		}
	}
	if _, ok := s.closed[2]; ok {
		return errors.New("paid order 2 was closed")
	}
	return nil
}
