// Package prometheus exports what lockgen's runtime does as Prometheus
// metrics: a runtime.Observer to install with runtime.WithObserver.
//
//	obs := lockprom.New(prometheus.DefaultRegisterer)
//	rt := lockrt.New(rdb, lockrt.WithObserver(obs))
//
// Every series is labelled by the object's name in the spec (and the
// operation or outcome), never by param values, so their number does not
// grow with the number of instances:
//
//	lockgen_operations_total{op, object, result="ok|error"}   Lock, Acquire, Allow, Offer, Take calls, worker attempts (Process)
//	lockgen_acquire_wait_seconds{object}                       how long acquisitions waited (histogram)
//	lockgen_hold_seconds{object}                               how long leases and permits were held (histogram)
//	lockgen_leases_lost_total{object}
//	lockgen_renewals_total{object, result="ok|failed"}
//	lockgen_script_reloads_total{script}                      scripts sent again after NOSCRIPT
//	lockgen_queue_items_total{object, event="enqueued|delivered|acked|nacked|dead"}
//	lockgen_delivery_lateness_seconds{object}                 how late the delay timer made delayed items ready (histogram)
//	lockgen_limiter_requests_total{object, decision="allowed|denied"}
//	lockgen_timer_retries_total{object}                        runs of a queue's delay timer that failed and were retried
//	lockgen_pubsub_lost_total{server}                          pub/sub connections that failed (server: a cluster node under sharded pub/sub, else "")
//	lockgen_pubsub_resubscribed_total                          channels subscribed again after their connection failed
//	lockgen_wait_fallbacks_total{object}                       waits ended by their fallback timer, not a wake-up
//
// The last four are the faults an operator wants to see: waiters keep
// their fallback timers while a connection is down, and the delay timer
// retries, so nothing is lost, but a rising count means Redis was
// unreachable, failed over, or killed connections, or (the fallbacks)
// that holders stop without releasing: their leases run out.
//
// It is a module of its own, so that the runtime depends on go-redis
// alone.
package prometheus

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockgen/lockgen/runtime"
)

// Observer is the runtime.Observer that updates the metrics.
type Observer struct {
	ops       *prometheus.CounterVec
	wait      *prometheus.HistogramVec
	hold      *prometheus.HistogramVec
	lost      *prometheus.CounterVec
	renewals  *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	queue     *prometheus.CounterVec
	lateness  *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	retries   *prometheus.CounterVec
	lostSubs  *prometheus.CounterVec
	resubs    prometheus.Counter
	fallbacks *prometheus.CounterVec
	fires     *prometheus.CounterVec
	fireLate  *prometheus.HistogramVec
}

var _ runtime.Observer = (*Observer)(nil)

// New registers the metrics with reg and returns their observer. It
// panics, as prometheus.MustRegister does, when reg already has them.
func New(reg prometheus.Registerer) *Observer {
	buckets := []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300}
	o := &Observer{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_operations_total", Help: "Observed lockgen operations (Lock, Acquire, Allow, Offer, Take, Process), by outcome.",
		}, []string{"op", "object", "result"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockgen_acquire_wait_seconds", Help: "How long lock and permit acquisitions waited.", Buckets: buckets,
		}, []string{"object"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockgen_hold_seconds", Help: "How long leases and permits were held until released.", Buckets: buckets,
		}, []string{"object"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_leases_lost_total", Help: "Leases and permits that ended without their holder giving them up.",
		}, []string{"object"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_renewals_total", Help: "Watchdog renewals, by outcome.",
		}, []string{"object", "result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_script_reloads_total", Help: "Scripts sent again after NOSCRIPT (a restart, failover or SCRIPT FLUSH).",
		}, []string{"script"}),
		queue: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_queue_items_total", Help: "Queue items, by what happened to them.",
		}, []string{"object", "event"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockgen_delivery_lateness_seconds", Help: "How late the delay timer made delayed items ready: moved minus due, on the Redis server's clock.", Buckets: buckets,
		}, []string{"object"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_limiter_requests_total", Help: "Requests a limiter decided on, by decision.",
		}, []string{"object", "decision"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_timer_retries_total", Help: "Runs of a queue's delay timer that failed (Redis unreachable, a failover) and were retried.",
		}, []string{"object"}),
		lostSubs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_pubsub_lost_total", Help: "Pub/sub connections that failed (an outage, CLIENT KILL, a failover); their channels are subscribed again. server is the cluster node under sharded pub/sub, else empty.",
		}, []string{"server"}),
		resubs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockgen_pubsub_resubscribed_total", Help: "Channels subscribed again after their pub/sub connection failed.",
		}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_wait_fallbacks_total", Help: "Waits for a lock or permits ended by their fallback timer, not a wake-up: a holder's lease ran out unreleased, a wake-up was lost, or Redis came back after an outage.",
		}, []string{"object"}),
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgen_schedule_fires_total", Help: "Schedule ticks this process fired, and claims, handlers or builds that failed.",
		}, []string{"object", "result"}),
		fireLate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lockgen_schedule_fire_lateness_seconds", Help: "How late this process fired schedule ticks: claimed minus due, on the Redis server's clock.", Buckets: buckets,
		}, []string{"object"}),
	}
	reg.MustRegister(o.ops, o.wait, o.hold, o.lost, o.renewals, o.reloads, o.queue, o.lateness, o.decisions, o.retries, o.lostSubs, o.resubs, o.fallbacks, o.fires, o.fireLate)
	return o
}

// Start counts the operation when it ends.
func (o *Observer) Start(ctx context.Context, op runtime.Op) (context.Context, func(error)) {
	return ctx, func(err error) {
		result := "ok"
		if err != nil {
			result = "error"
		}
		o.ops.WithLabelValues(string(op.Kind), op.Object, result).Inc()
	}
}

// Event updates the metric of the event.
func (o *Observer) Event(_ context.Context, e runtime.Event) {
	switch e.Kind {
	case runtime.EventAcquired:
		o.wait.WithLabelValues(e.Object).Observe(e.Duration.Seconds())
	case runtime.EventReleased:
		o.hold.WithLabelValues(e.Object).Observe(e.Duration.Seconds())
	case runtime.EventLeaseLost:
		o.lost.WithLabelValues(e.Object).Inc()
	case runtime.EventRenewed:
		o.renewals.WithLabelValues(e.Object, "ok").Inc()
	case runtime.EventRenewFailed:
		o.renewals.WithLabelValues(e.Object, "failed").Inc()
	case runtime.EventScriptReloaded:
		o.reloads.WithLabelValues(e.Object).Inc()
	case runtime.EventEnqueued:
		o.queue.WithLabelValues(e.Object, "enqueued").Add(float64(max(e.N, 1)))
	case runtime.EventDelivered, runtime.EventAcked, runtime.EventNacked, runtime.EventDead:
		o.queue.WithLabelValues(e.Object, string(e.Kind)).Inc()
	case runtime.EventDue:
		o.lateness.WithLabelValues(e.Object).Observe(e.Duration.Seconds())
	case runtime.EventAllowed, runtime.EventDenied:
		o.decisions.WithLabelValues(e.Object, string(e.Kind)).Add(float64(max(e.N, 1)))
	case runtime.EventTimerRetry:
		o.retries.WithLabelValues(e.Object).Inc()
	case runtime.EventPubSubLost:
		o.lostSubs.WithLabelValues(e.Key).Inc()
	case runtime.EventResubscribed:
		o.resubs.Inc()
	case runtime.EventWaitFallback:
		o.fallbacks.WithLabelValues(e.Object).Inc()
	case runtime.EventFired:
		o.fires.WithLabelValues(e.Object, "fired").Inc()
		o.fireLate.WithLabelValues(e.Object).Observe(e.Duration.Seconds())
	case runtime.EventFireFailed:
		o.fires.WithLabelValues(e.Object, "failed").Inc()
	}
}
