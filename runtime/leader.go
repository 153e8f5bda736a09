package runtime

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/values"
	"github.com/lockgen/lockgen/runtime/internal/hub"
)

// Leader election is a fenced lock campaigned for (spec kind leader):
// the leader is the lock's holder, its epoch the hold's fencing token,
// which only grows; campaigning is waiting for the lock with the waiter
// registry (no polling, a hand-off to the longest campaigner when the
// leader resigns or its lease runs out), and leading is holding it, with
// the watchdog renewing the lease at lease/3. A leadership's context
// ends when the lease is lost, by the local lease deadline as well (a
// paused leader sees its context ended before its next write), so two
// leaders' contexts are never live at once, as long as Redis keeps the
// lock (see "Fenced locks" in docs/design.md for what a reset does).
//
// Costs: a campaign costs what a Lock's wait costs (one script to enter,
// then its client's heartbeat or registry refresh however many
// goroutines campaign); a leader costs its lease's renewals; winning and
// resigning publish one message each on the election's channel, which
// Observe listens to. An observer reads the lock (GET and PTTL, one
// round trip) when a message comes and when the leader's lease would end
// if it were not renewed: once per lease while one leads.

// Election is the leader election of one key, over its fenced lock.
// Build it with NewElection, or the generated code's method of a spec
// lock of kind leader. It is safe for concurrent use.
type Election struct {
	l *Lock
}

// NewElection returns the election over l. Epochs are l's fencing
// tokens: l should be a fenced lock (spec kind leader or fenced); over
// another kind every epoch is 0.
func NewElection(l *Lock) *Election { return &Election{l: l} }

// Name returns the spec's name of the election.
func (e *Election) Name() string { return e.l.Name() }

// Key returns the key of the election's lock.
func (e *Election) Key() string { return e.l.Key() }

// Lock returns the lock the election runs over (to inspect it; a lease
// taken with it is a leadership without Leadership's resign-on-cancel).
func (e *Election) Lock() *Lock { return e.l }

// channel is where winning and resigning are announced: the lock's key
// with the suffix ":leader", in its slot.
func (e *Election) channel() string { return keys.Sub(e.l.key, "leader") }

// Leadership is one term of leading, returned by Campaign. Its Context
// ends when the term does: with cause ErrLockLost when the lease was lost
// (also by its local deadline), with the campaign context's cause when
// that ended, and context.Canceled after Resign.
type Leadership struct {
	e     *Election
	lease *Lease
	stop  func() bool // stops the resign on the campaign context's end
	once  sync.Once
	err   error
}

// Campaign blocks until this process leads (it holds the election's
// lock), ctx ends, or the client is closed. Leading lasts until the lease
// is lost, Resign is called, or ctx ends: then it resigns by itself.
// Give Campaign a context that lives as long as the process may lead,
// not a request's.
//
// It returns an error matching ErrNotObtained and ctx's error when ctx
// ended first, ErrFenceReset when the epoch went back (Redis lost the
// counter: nothing is held, and the next Campaign counts on from the new
// epoch), ErrClosed after the client was closed, or a Redis error.
func (e *Election) Campaign(ctx context.Context) (*Leadership, error) {
	o, err := acquireOpts(e.l.def.Lease, []AcquireOption{WithParentCancel()})
	if err != nil {
		return nil, err
	}
	le, err := e.l.acquire(ctx, -1, o)
	if err != nil {
		return nil, err
	}
	ls := &Leadership{e: e, lease: le}
	ls.stop = context.AfterFunc(ctx, func() { _ = ls.resign(context.WithoutCancel(ctx)) })
	go e.announce(context.WithoutCancel(ctx), strconv.FormatInt(le.token, 10)) // best effort, off the caller's path
	return ls, nil
}

// announce publishes msg on the election's channel, within
// ReleaseTimeout; an observer that misses it reads the lock at the lease's
// end all the same.
func (e *Election) announce(ctx context.Context, msg string) {
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	_, _ = within(ctx, func() error {
		return e.l.c.rdb.Do(ctx, e.l.c.publishCmd(), e.channel(), msg).Err()
	})
}

// Context returns the term's context: the campaign context's values and
// the leader's owner (Campaign or Lock under it re-enters), ended when
// the term ends (see Leadership). Do the leader's work under it.
func (ls *Leadership) Context() context.Context {
	if ls == nil {
		return endedContext(ErrNotHeld)
	}
	return ls.lease.Context()
}

// Epoch returns the term's epoch: larger than every earlier term's of
// the election, by any process. Pass it to the storage the leader
// writes, which can then refuse a deposed leader's writes.
func (ls *Leadership) Epoch() int64 {
	if ls == nil {
		return 0
	}
	return ls.lease.Token()
}

// Lease returns the term's lease: the hold behind it.
func (ls *Leadership) Lease() *Lease {
	if ls == nil {
		return nil
	}
	return ls.lease
}

// Resign ends the term at once and hands the lead to the longest
// campaigner, if one waits. It completes although ctx was cancelled (see
// Lease.Unlock). A second call returns what the first returned.
//
// It returns ErrLockLost when the term had ended by loss already,
// ErrNotHeld on a nil Leadership, or ErrNotReleased wrapping the Redis
// error when Redis could not be reached (the lease then runs out by
// itself).
func (ls *Leadership) Resign(ctx context.Context) error {
	if ls == nil {
		return ErrNotHeld
	}
	ls.stop()
	return ls.resign(ctx)
}

func (ls *Leadership) resign(ctx context.Context) error {
	ls.once.Do(func() {
		ls.err = ls.lease.Unlock(ctx)
		if ls.err == nil {
			go ls.e.announce(context.WithoutCancel(ctx), "") // best effort, off the caller's path
		}
	})
	return ls.err
}

// Leader is who leads an election, as Redis has it.
type Leader struct {
	ID    string        // the leading client's id (WithID)
	Owner string        // the leader's owner id: its client's id and a hold number
	Epoch int64         // the term's epoch (its fencing token)
	TTL   time.Duration // how long the term's lease has left unless renewed
}

// Leads reports whether someone leads (a zero Leader: nobody).
func (ld Leader) Leads() bool { return ld.Owner != "" }

// same reports whether ld and o are one term.
func (ld Leader) same(o Leader) bool { return ld.Owner == o.Owner && ld.Epoch == o.Epoch }

// Leader returns the current leader, the zero Leader when nobody leads
// (one round trip: GET and PTTL). It returns ctx's error when ctx ends
// first, or a Redis error.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	return readValue(ctx, func() (Leader, error) {
		var get *redis.StringCmd
		var ttl *redis.DurationCmd
		_, err := e.l.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			get = p.Get(ctx, e.l.key)
			ttl = p.PTTL(ctx, e.l.key)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return Leader{}, err
		}
		h, ok := values.ParseHold(get.Val())
		if !ok {
			return Leader{}, nil
		}
		id := h.Owner
		if i := strings.LastIndexByte(id, ':'); i >= 0 {
			id = id[:i]
		}
		return Leader{ID: id, Owner: h.Owner, Epoch: h.Token, TTL: max(ttl.Val(), 0)}, nil
	})
}

// Observe sends the current leader (the zero Leader when nobody leads),
// then every change of leader or term, on the returned channel, which is
// closed when ctx ends or the client is closed. A receiver that falls
// behind gets the latest leader, not every one in between. Changes come
// with the winner's and resigner's messages, and by reading the lock when
// the leader's lease would end (a leader that died); while Redis cannot
// be reached Observe retries every second and sends nothing.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	h := e.l.c.hub
	var (
		sub    *hub.Subscription
		w      *hub.Waiter
		signal = make(chan struct{}, 1)
	)
	defer func() {
		if sub != nil {
			h.Leave(sub, w, true)
			h.Unsubscribe(sub)
		}
	}()
	var (
		last    Leader
		pending bool // last is not yet received
		first   = true
		timer   = time.NewTimer(0)
	)
	defer timer.Stop()
	for {
		if sub == nil { // subscribe before reading, so no change falls between
			if s, err := h.Subscribe(ctx, e.channel()); err == nil {
				sub = s
				w = h.Watch(sub, func(string) {
					select {
					case signal <- struct{}{}:
					default:
					}
				})
			} else if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return
			}
		}
		next := time.Second // Redis cannot be reached: retry
		if cur, err := e.Leader(ctx); err == nil {
			if first || !cur.same(last) {
				last, pending, first = cur, true, false
			}
			next = e.l.def.Lease // a lost message costs at most a lease
			if cur.Leads() {
				next = cur.TTL + time.Millisecond
			}
		}
		timer.Reset(next) // (Go 1.23 timers: no stale fire to drain)
		for waiting := true; waiting; {
			var send chan<- Leader
			if pending {
				send = out
			}
			select {
			case send <- last:
				pending = false
			case <-signal:
				waiting = false
			case <-timer.C:
				waiting = false
			case <-ctx.Done():
				return
			case <-h.Closed():
				return
			}
		}
	}
}
