package shopqueues

import (
	"context"
	"time"

	"example.com/gentest/queue/orders"
	lockrt "github.com/lockgen/lockgen/runtime"
)

func use(ctx context.Context, c *lockrt.Client) error {
	if err := Preload(ctx, c); err != nil {
		return err
	}
	queues := NewQueues(c)
	if _, err := queues.OrderClose().OfferIn(ctx, orders.CloseRequest{OrderID: 42}, 30*time.Minute); err != nil {
		return err
	}
	d, err := queues.OrderClose().Take(ctx)
	if err != nil {
		return err
	}
	var req orders.CloseRequest = d.Value
	_ = req
	if err := d.Ack(ctx); err != nil {
		return err
	}
	if err := queues.Emails("acme").Offer(ctx, "hello"); err != nil {
		return err
	}
	var body string
	if body, err = queues.Emails("acme").Take(ctx); err != nil {
		return err
	}
	_ = body
	// Peek, batch take, remove and drain are typed too.
	var next orders.CloseRequest
	if next, err = queues.OrderClose().Peek(ctx); err != nil {
		return err
	}
	if _, err := queues.OrderClose().Remove(ctx, next); err != nil {
		return err
	}
	var batch []*lockrt.Delivery[orders.CloseRequest]
	if batch, err = queues.OrderClose().TakeN(ctx, 10); err != nil {
		return err
	}
	for _, d := range batch {
		if err := d.Ack(ctx); err != nil {
			return err
		}
	}
	var bodies []string
	if bodies, err = queues.Emails("acme").Drain(ctx); err != nil {
		return err
	}
	_ = bodies
	id, err := queues.Audit().Enqueue(ctx, Event{Kind: "login"}, lockrt.Unique("login-1")) // the spec's unique window
	if err != nil {
		return err
	}
	_ = id
	return queues.Thumbnails(3).OfferAt(ctx, []byte{1, 2}, time.Now().Add(time.Minute))
}
