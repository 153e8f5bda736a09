package runtime

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// takerRefresher keeps a client's waiting Takes registered in their
// queues' takers: one group per queue, whose one timer refreshes every
// waiting Take of the client there in one call (queue_wait with all their
// owners) every queueRefresh, skipped while its Takes registered less
// than that ago. A waiting Take then costs nothing per second, and a
// client one call per queue it waits on per period, however many of its
// goroutines wait there (the waiter registry's refresher does the same
// for locks: refresh.go). A refresh that finds items ready (a wake-up
// that was lost), or a Take's entry gone, wakes the group's Takes: each
// takes, or registers again.
type takerRefresher struct {
	mu     sync.Mutex
	groups map[string]*takerGroup // by queue key
}

// takerGroup is one queue's waiting Takes of a client.
type takerGroup struct {
	q        *queue
	members  map[string]*takerMember // by owner
	timer    *time.Timer
	failures int
}

type takerMember struct {
	signal chan struct{}
	since  time.Time // when it joined (about: its registration)
}

// joinTakers adds owner, woken on signal, to q's group of this client, and
// returns its leave.
func (c *Client) joinTakers(q *queue, owner string, signal chan struct{}) (leave func()) {
	f := &c.takers
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groups == nil {
		f.groups = map[string]*takerGroup{}
	}
	g := f.groups[q.key]
	if g == nil {
		g = &takerGroup{q: q, members: map[string]*takerMember{}}
		f.groups[q.key] = g
		g.timer = time.AfterFunc(jitter(queueRefresh), func() { c.refreshTakers(g) })
	}
	g.members[owner] = &takerMember{signal: signal, since: time.Now()}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(g.members, owner)
		if len(g.members) == 0 && f.groups[q.key] == g {
			g.timer.Stop()
			delete(f.groups, q.key)
		}
	}
}

// jitter is d a little earlier at random (up to a tenth), at least 10ms,
// so that a client's groups spread out.
func jitter(d time.Duration) time.Duration {
	return max(d-time.Duration(rand.Int64N(int64(max(d, 0))/10+1)), 10*time.Millisecond)
}

// refreshTakers runs g's refresh and wakes its Takes when items are
// ready, then arms the next.
func (c *Client) refreshTakers(g *takerGroup) {
	f := &c.takers
	f.mu.Lock()
	if f.groups[g.q.key] != g || len(g.members) == 0 {
		f.mu.Unlock()
		return
	}
	// Takes that registered less than a period ago need no refresh yet.
	oldest := time.Now()
	for _, m := range g.members {
		if m.since.Before(oldest) {
			oldest = m.since
		}
	}
	if due := oldest.Add(queueRefresh); time.Until(due) > queueRefresh/30 {
		g.timer.Reset(time.Until(due))
		f.mu.Unlock()
		return
	}
	owners := make([]string, 0, len(g.members))
	for o := range g.members {
		owners = append(owners, o)
	}
	refreshed := time.Now()
	f.mu.Unlock()
	if c.hub.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueRefresh)
	defer cancel()
	// The Takes are woken when items are ready (a wake-up was lost) or
	// an entry was gone (a Take woken meanwhile, or Redis lost it): each
	// takes, or registers again.
	var wakeAll bool
	var err error
	for i := 0; i < len(owners) && err == nil && !wakeAll; i += refreshBatch {
		// queue_wait reply: int
		var r int64
		r, err = g.q.ops().RefreshTakers(ctx, owners[i:min(i+refreshBatch, len(owners))]).Int64()
		wakeAll = err == nil && r != 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groups[g.q.key] != g {
		return
	}
	if err != nil {
		// Redis unreachable: try again soon; the Takes ride it out on
		// their own.
		g.timer.Reset(retryBackoff(g.failures))
		g.failures++
		return
	}
	g.failures = 0
	for _, m := range g.members {
		if !m.since.After(refreshed) {
			m.since = refreshed
		}
		if wakeAll {
			wake(m.signal)
		}
	}
	g.timer.Reset(jitter(queueRefresh))
}
