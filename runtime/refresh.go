package runtime

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockgen/lockgen/runtime/internal/impl"
	"github.com/lockgen/lockgen/runtime/internal/rdb"
)

// LiveRegistryTTL is how long a waiter's registration lasts unrefreshed
// where a release can tell a waiter whose client went away from its
// wake-up's count of receivers (a single primary, or sharded pub/sub on
// a cluster: Conn.CountsReceivers): a dead or disconnected client is
// passed over at once, so the deadline only bounds a client that stopped
// (SIGSTOP, a long pause) with its connection open, and a client keeps
// its waiters registered with one refresh per object every third of it,
// however many of its goroutines wait there (see "Waiter registry" in
// docs/design.md), unless its waits are watched (WatchedRegistryTTL,
// alive.go). Elsewhere (classic pub/sub on a cluster or a Ring) a
// registration lasts RegistryTTL.
const LiveRegistryTTL = impl.LiveRegistryTTL

// waitRegistryTTL is how long a registration of a waiter of this client
// lasts unrefreshed, when its object does not set one (WaiterTTL).
func (c *Client) waitRegistryTTL() time.Duration {
	c.publishCmd() // the pub/sub mode decides (probed once)
	if c.conn.CountsReceivers() {
		return LiveRegistryTTL
	}
	return RegistryTTL
}

// registration is a waiter's entry in its object's waiter registry, which
// its client refreshes together with its other waiters' there (refresher).
type registration struct {
	reg    rdb.Registry
	ttl    time.Duration
	member string
	pttl   time.Duration // the hold's TTL its last attempt saw
	// short: the object's lease is at most twice HandoffLease, so its
	// hold's TTL does not tell a holder's lease from a hand-off's: its
	// group always watches the hold's end (see next).
	short bool
	// fixed: its holders' leases are not renewed, so that a watched
	// group of it rests on the hold's end rather than on clients
	// (alive.go).
	fixed bool

	woken atomic.Bool // a refresh woke the waiter (its wait's fallback)
	group *regGroup   // (the refresher's)
}

// refresher keeps a client's waiters registered: one group per object,
// whose one timer refreshes every member of the group in one call
// (registry_refresh) every third of the registration TTL, or when the
// object's hold runs out if that is sooner. A waiter then costs nothing
// per second, and a waiting client one call per object it waits on per
// period. A refresh that finds a member gone (handed what it waited for,
// or passed over: its message was lost or its client seemed gone) wakes
// the group's waiters to try again; one that finds the object free with
// members still registered (the holder's lease ran out, or a hand-off to
// a stopped client did) wakes the longest-waiting of them.
type refresher struct {
	mu     sync.Mutex
	groups map[string]*regGroup // by regGroup.key
	aliveMonitor
}

// regGroup is one object's waiters of a client.
type regGroup struct {
	key      string // in refresher.groups: the registry's waiters key and the TTL
	reg      rdb.Registry
	ttl      time.Duration
	short    bool         // (registration's)
	members  []*regMember // the oldest first
	timer    *time.Timer
	watching bool // the timer is the hold's end, not the registrations' (next)
	failures int
	lastErr  error // the last refresh's, while Redis could not be reached
	single   bool  // the last refresh found a compact single hold (rdb.Registry.Refresh)
	// running: a refresh is out (between its two holds of the lock); a
	// timer that fires meanwhile (lost and looked reset it to 0) leaves
	// urgent for that refresh to act on when it is back, so one group's
	// refreshes never overlap.
	running bool

	// The watched wait (alive.go): watched, the group registers its
	// members for WatchedRegistryTTL and asks its refresh who to watch;
	// watch is whom its last refresh named; trusted, every one of them
	// was alive at the last look, so the group refreshes only when
	// watchedEvery says; urgent, the next refresh is not put off (a
	// watched client's heartbeat lapsed).
	watched   bool
	fixed     bool // (registration's): trusted, it watches the hold's end, not clients
	starred   int  // refreshes to run without asking whom to watch: the last answer was none ('*')
	watch     []string
	trusted   bool
	urgent    bool
	refreshed time.Time // the last successful refresh
}

type regMember struct {
	r      *registration
	signal chan struct{}
	since  time.Time // when its attempt registered it (about: its join), or the last refresh
	long   bool      // a refresh registered it for WatchedRegistryTTL
}

// wake signals m's waiter, as its wait's fallback.
func (m *regMember) wake() {
	m.r.woken.Store(true)
	wake(m.signal)
}

// join adds a waiter, woken on signal, to its object's group, and returns
// its leave.
func (c *Client) joinRefresh(r *registration, signal chan struct{}) (leave func()) {
	m := &regMember{r: r, signal: signal, since: time.Now()}
	f := &c.regs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groups == nil {
		f.groups = map[string]*regGroup{}
	}
	// One group per registry and TTL: waits of two definitions of one
	// key (another WaiterTTL) keep their own, neither dropping the other.
	key := r.reg.Waiters + "\x00" + r.ttl.String()
	g := f.groups[key]
	if g == nil {
		// (A read-write lock's or semaphore's refresh reads the compact
		// single hold first until one finds the holds' full form.)
		g = &regGroup{key: key, reg: r.reg, ttl: r.ttl, short: r.short, single: r.reg.Single != "",
			watched: c.watched(r), fixed: r.fixed}
		f.groups[key] = g
		if g.watched {
			f.watchedGroups++
		}
		g.timer = time.AfterFunc(g.next(r.pttl, false), func() { c.refresh(g) })
	}
	g.members = append(g.members, m)
	r.group = g
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, o := range g.members {
			if o == m {
				g.members = append(g.members[:i], g.members[i+1:]...)
				break
			}
		}
		if len(g.members) == 0 && f.groups[g.key] == g {
			g.timer.Stop()
			delete(f.groups, g.key)
			f.unwatch(g)
			if g.watched {
				f.watchedGroups--
			}
		}
	}
}

// A hold that has at most HandoffLease left when a client's first waiter
// registers behind it may be a hand-off (its new holder renews it at
// once): the group does not watch its end until it knows its member
// heads the queue, at its first refresh, LiveRegistryTTL/3 later. So a
// holder that died with less than HandoffLease left is found that late
// by a waiter that came after (TestDeadHolderExpires); watching every
// such hold would cost a script per client and wait in a herd.
//
// next is when the group refreshes after a call that saw the hold's TTL
// pttl: a third of the registration TTL, or just after the hold runs out
// when that is sooner and the group watches it (watch: its client's
// member heads the queue, or the hold is a holder's lease rather than a
// hand-off's: a holder that died is found without a release, by one
// client rather than every waiting one), a little earlier at random so
// that a client's groups spread out.
func (g *regGroup) next(pttl time.Duration, head bool) time.Duration {
	d := g.ttl / 3
	watch := head || g.short || pttl > HandoffLease
	// (A PTTL of 0 is a hold with less than a millisecond left: it is
	// watched like any other, not taken for one without an end.)
	g.watching = watch && pttl >= 0 && pttl+10*time.Millisecond < d
	if g.watching {
		d = pttl + 10*time.Millisecond
	}
	return jitter(d)
}

// refresh runs the group's refresh and wakes its waiters as it finds
// (see refresher), then arms the next.
func (c *Client) refresh(g *regGroup) {
	f := &c.regs
	f.mu.Lock()
	if f.groups[g.key] != g || len(g.members) == 0 || g.running {
		f.mu.Unlock()
		return
	}
	// Waiters that registered less than a third of the TTL ago need no
	// refresh yet (under contention most waits are that short): unless
	// the group watches the hold's end, or a client it watched lapsed,
	// the call waits until one is due (due).
	if due := g.due(f.watchedGroups); !g.watching && !g.urgent && time.Until(due) > g.ttl/30 {
		g.timer.Reset(time.Until(due))
		f.mu.Unlock()
		return
	}
	g.urgent = false
	if g.watched && !g.fixed {
		// A wait this long is watched: the client beats from now on, for
		// as long as it has such groups (waits that end before their
		// first refresh, most under contention, cost nothing more).
		c.startBeat()
	}
	sent := slices.Clone(g.members)
	members := make([]string, len(sent))
	for i, m := range sent {
		members[i] = m.r.member
	}
	ttl := g.ttl
	if g.watched {
		ttl = WatchedRegistryTTL
	}
	ask := g.watched && g.starred == 0
	g.starred = max(g.starred-1, 0)
	refreshed := time.Now()
	pttl, head, single := time.Duration(-1), false, g.single
	g.running = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		g.running = false
		if g.urgent && f.groups[g.key] == g {
			g.timer.Reset(0)
		}
	}()
	if c.hub.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.ttl/3)
	defer cancel()
	type result struct {
		rdb.Refreshed
		err error
	}
	var n int64
	var watch []string
	watchable := ask && len(members) <= refreshBatch
	var err error
	// Members in batches that keep each call's arguments small (a group
	// of more than one batch is not watched).
	for i := 0; i < len(members) && err == nil; i += refreshBatch {
		batch := members[i:min(i+refreshBatch, len(members))]
		r, ok := within(ctx, func() result {
			got, err := g.reg.Refresh(ctx, &c.conn, ttl, batch, single, ask && i == 0)
			return result{got, err}
		})
		if !ok {
			r.err = ctx.Err()
		}
		n, pttl, head, err = n+r.Registered, r.PTTL, head || r.Head, r.err
		if r.err == nil {
			single = r.Compact
		}
		if i == 0 {
			watch, watchable = r.Watch, watchable && r.Watchable
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groups[g.key] != g {
		return
	}
	g.single = single
	if err != nil {
		// Redis unreachable: try again soon; the waiters ride it out on
		// their own (a reconnection wakes them, see "Waiting").
		g.timer.Reset(retryBackoff(g.failures))
		g.failures++
		g.lastErr = err
		return
	}
	g.failures, g.lastErr, g.refreshed = 0, nil, refreshed
	for _, m := range g.members {
		if !m.since.After(refreshed) { // (those that joined since registered later)
			m.since = refreshed
		}
	}
	for _, m := range sent {
		m.long = m.long || g.watched
	}
	switch {
	case n < int64(len(members)):
		for _, m := range g.members {
			m.wake()
		}
	case pttl == -2*time.Millisecond && len(g.members) > 0:
		g.members[0].wake()
	}
	if ask && !watchable {
		g.starred = 2 // (asking costs a GET and an LRANGE)
	}
	switch {
	case watchable && n == int64(len(members)) && g.fixed:
		// A hold that is not renewed ends when its PTTL says, whoever
		// holds it: the group looks then, and watches nobody.
		f.unwatch(g)
		g.trusted = true
	case watchable && n == int64(len(members)):
		f.watchGroup(g, watch)
	default:
		f.unwatch(g)
	}
	if g.trusted {
		d := time.Until(g.due(f.watchedGroups))
		g.watching = g.fixed && pttl >= 0 && pttl+10*time.Millisecond < d
		if g.watching {
			g.timer.Reset(pttl + 10*time.Millisecond)
			return
		}
		g.timer.Reset(jitter(d))
		return
	}
	g.timer.Reset(g.next(pttl, head))
}

// due is when g must refresh at the latest (f.mu held; k is the client's
// watched groups): a third of the TTL after the oldest registration of a
// member (its attempt's, or the last refresh's); for a trusted group,
// only its members not registered for WatchedRegistryTTL yet count so,
// and otherwise watchedEvery(k) after its last refresh.
func (g *regGroup) due(k int) time.Time {
	var d time.Time
	for _, m := range g.members {
		if g.trusted && m.long {
			continue
		}
		if t := m.since.Add(g.ttl / 3); d.IsZero() || t.Before(d) {
			d = t
		}
	}
	if g.trusted {
		if t := g.refreshed.Add(watchedEvery(k)); d.IsZero() || t.Before(d) {
			d = t
		}
	}
	return d
}

// refreshBatch is the most members one registry_refresh call carries.
const refreshBatch = 512

// wake signals a waiter without blocking (a signal pending is enough).
func wake(signal chan struct{}) {
	select {
	case signal <- struct{}{}:
	default:
	}
}

// refreshErr returns the error of r's group's last refresh while Redis
// could not be reached, nil otherwise: the waits ride an outage on their
// group's refreshes, and one that ends meanwhile matches it too.
func (c *Client) refreshErr(r *registration) error {
	c.regs.mu.Lock()
	defer c.regs.mu.Unlock()
	if r.group == nil {
		return nil
	}
	return r.group.lastErr
}

// waitSleep is how long the waiter of r sleeps at most when nothing
// wakes it (groupedSleep, or watchedSleep for a group that may be
// trusted).
func (c *Client) waitSleep(r *registration) time.Duration {
	if c.watched(r) {
		return watchedSleep
	}
	return groupedSleep
}

// groupedSleep is how long a waiter whose client refreshes its
// registration (refresher) sleeps at most when nothing wakes it: its
// group's refresh does the looking, and this only bounds a wait whose
// group could not.
const groupedSleep = 5 * time.Minute

// wakeOwner wakes the waits of owner on other objects than the one whose
// registry's waiters key is except: a wake-up names an owner, not an
// object, so one that reached a wait of a carried owner (an owner that
// waits on several objects at once, on one channel) and did not serve it
// may have been for another of its waits (see "Waiting" in
// docs/design.md).
func (c *Client) wakeOwner(owner, except string) {
	f := &c.regs
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		if g.reg.Waiters == except {
			continue
		}
		for _, m := range g.members {
			if m.r.member == owner || strings.HasPrefix(m.r.member, owner+" ") {
				wake(m.signal)
			}
		}
	}
}
