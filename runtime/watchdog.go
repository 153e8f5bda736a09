package runtime

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// The watchdog (runtime/internal/watchdog) renews a client's holds. This
// file is the runtime's side of it: the client's renew function, and the
// holders the watchdog sees. A Lease, a Permit and a RedLockLease are
// registered as leaseHold, permitHold and redHold, the same values under
// types whose methods (Cancel, Extend, ...) are the watchdog's, not the
// user's; a conversion costs nothing, and every Add and Remove of one
// hold converts it the same way (the watchdog compares holders).

// newWatchdog returns the watchdog of c: its renewals run in c's Redis,
// with the client's heartbeat when one is due (holderBeat), and their
// outcomes go to c's observers. A full pipeline (MaxPipeline renewals;
// per node on a cluster, every renewal may be on the heartbeat's) has no
// room for the heartbeat: it is sent alone after it, one round trip more
// at most every BeatEvery, where leaving room in every pipeline would
// cost one in 64 of every renewal period's.
func newWatchdog(c *Client) *watchdog.Watchdog {
	w := watchdog.New(func(ctx context.Context, batch []*watchdog.Held, _ time.Time) {
		beat := c.holderBeat(ctx, batch)
		also := beat
		if len(batch) >= watchdog.MaxPipeline {
			also = nil
		}
		for i, cmd := range watchdog.RenewOn(ctx, c.rdb, batch, also) {
			batch[i].Outcome = watchdog.RenewOutcome(cmd)
			c.observeRenewal(ctx, batch[i].Renew.Object, batch[i].Outcome, cmd.Err())
			c.conn.ReloadOnConnError(cmd.Err())
		}
		if beat != nil && also == nil {
			pipe := c.rdb.Pipeline()
			beat(pipe)
			_, _ = pipe.Exec(ctx)
		}
	})
	w.OnLost = func(object string, cause error) {
		c.holdGone()
		c.observeLost(object, cause)
	}
	return w
}

type (
	leaseHold  Lease
	permitHold Permit
	redHold    RedLockLease
)

func (h *leaseHold) Cancel(cause error)          { (*Lease)(h).cancel(cause) }
func (h *leaseHold) Extend(until time.Time) bool { return (*Lease)(h).extend(until) }

// RenewArgs returns the ARGV of the lease's renewal, made at its first
// renewal (Renewal.ArgsOf).
func (h *leaseHold) RenewArgs() []any {
	le := (*Lease)(h)
	return le.lock.ops.Args(le.lease.Milliseconds(), le.owner)
}

// YoungNode is the watchdog's node of the lease's hold while young.
func (h *leaseHold) YoungNode() *watchdog.Young { return &h.young }

// Promoted says, for the watchdog's entry of the lease's hold made when it
// stops being young, its key, how it is renewed and when it was taken.
func (h *leaseHold) Promoted() (watchdog.Key, watchdog.Renewal, time.Time) {
	le := (*Lease)(h)
	return le.held(), le.lock.renewal(le, 0), le.taken
}

func (h *permitHold) Cancel(cause error) { (*Permit)(h).cancel(cause) }

// RenewArgs returns the ARGV of the permit's renewal, made at its first
// renewal (Renewal.ArgsOf): its lease and owner.
func (h *permitHold) RenewArgs() []any {
	p := (*Permit)(h)
	return []any{p.lease.Milliseconds(), p.owner}
}

func (h *permitHold) Extend(until time.Time) bool { return (*Permit)(h).extend(until) }
func (h *redHold) Cancel(cause error)             { (*RedLockLease)(h).cancel(cause) }
func (h *redHold) Extend(until time.Time) bool    { return (*RedLockLease)(h).extend(until) }
