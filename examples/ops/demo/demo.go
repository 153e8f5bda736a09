// Package demo puts objects of every kind of examples/ops/shopops into a
// state an operator would look at: the operator demo, the dashboard tests
// and its browser test share it.
package demo

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/examples/ops/shopops"
	lockrt "github.com/lockgen/lockgen/runtime"
)

// Populate makes clients "billing" and "reports" hold something of every
// kind of shopops, and returns what closes them (their holds stay in Redis
// until their leases run out):
//
//   - Order(42) held by billing; Ledger("eu") held by billing (token 1);
//     Rates("EUR") read by billing and reports;
//   - 3 of Export("acme")'s 4 permits held by reports;
//   - Warmup("cache") counted down once (2 left); API("u-7") asked 5 times;
//   - Email("acme"): 2 ready, 1 delayed by an hour, 1 in flight, 1 dead
//     letter (gone@example.com, "smtp: 550 mailbox unavailable").
func Populate(ctx context.Context, rdb redis.UniversalClient) (func(), error) {
	billing := lockrt.New(rdb, lockrt.WithID("billing"))
	reports := lockrt.New(rdb, lockrt.WithID("reports"))
	done := func() { billing.Close(); reports.Close() }
	err := populate(ctx, billing, reports)
	if err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// held keeps the leases and permits the demo holds on purpose: they stay
// in Redis, for inspect and the dashboard to show, until their leases run
// out after Populate's closer closed the clients (which stops renewing
// them). Nothing else in the examples leaves a hold behind: cmd/leasecheck
// runs on them (TestExamples in cmd/leasecheck).
type held []any

// keep records a hold, and returns the error of the call that took it.
func (h *held) keep(v any, err error) error {
	if err == nil {
		*h = append(*h, v)
	}
	return err
}

func populate(ctx context.Context, billing, reports *lockrt.Client) error {
	var h held
	bl, rl := shopops.NewLocks(billing), shopops.NewLocks(reports)
	if err := h.keep(bl.Order(42).Lock(ctx)); err != nil {
		return err
	}
	if err := h.keep(bl.Ledger("eu").Lock(ctx)); err != nil {
		return err
	}
	for _, l := range []*shopops.Locks{bl, rl} {
		if err := h.keep(l.Rates("EUR").Read().Lock(ctx)); err != nil {
			return err
		}
	}
	if err := h.keep(shopops.NewSemaphores(reports).Export("acme").Acquire(ctx, 3)); err != nil {
		return err
	}
	if _, err := shopops.NewLatches(billing).Warmup("cache").CountDown(ctx); err != nil {
		return err
	}
	api := shopops.NewLimiters(billing).API("u-7")
	for range 5 {
		if _, err := api.Allow(ctx); err != nil {
			return err
		}
	}
	email := shopops.NewQueues(billing).Email("acme")
	if _, err := email.Offer(ctx, "gone@example.com"); err != nil {
		return err
	}
	for range 2 { // maxDeliveries 2: the second Nack dead-letters it
		d, err := email.Take(ctx)
		if err != nil {
			return err
		}
		if err := d.Nack(ctx, errors.New("smtp: 550 mailbox unavailable")); err != nil {
			return err
		}
	}
	for _, to := range []string{"ann@example.com", "bob@example.com", "cy@example.com"} {
		if _, err := email.Offer(ctx, to); err != nil {
			return err
		}
	}
	if _, err := email.OfferIn(ctx, "dee@example.com", time.Hour); err != nil {
		return err
	}
	_, err := email.Take(ctx) // in flight, never acknowledged here
	return err
}
