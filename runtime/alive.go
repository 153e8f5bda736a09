package runtime

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/runtime/internal/rdb"
	"github.com/lockgen/lockgen/runtime/internal/watchdog"
)

// The watched wait: a waiting client's cost per second does not grow
// with the objects it waits on (see "Waiter registry" in docs/design.md).
//
// A client whose group of waiters of a lock or semaphore (refresher)
// could otherwise only learn by looking that a holder died, or that a
// release handed the object to a client that stopped, refreshes the group
// with its refresh asking who to watch: the holders' clients and those of
// the waiters queued ahead of its own (registry_refresh's watch_of).
// Every client that holds or waits on such an object writes its heartbeat
// (rdb.AliveKey): a waiting one from its first refresh on, every
// BeatEvery, in one round trip with one MGET of the heartbeats it
// watches; a holding one in its watchdog's renewals. While every client
// a group watches is alive, and its members are registered for
// WatchedRegistryTTL, the group is trusted: it does not watch the hold's
// end, and refreshes only every watchedEvery. Behind leases the watchdog
// does not renew, a trusted group watches nobody and looks at the hold's
// end only (fixed). When a
// watched client's heartbeat lapses (it died, or stopped), every group
// watching it refreshes at once and goes back to watching the hold's end
// as before; so does one whose waiter's attempt failed (someone it did
// not watch may hold the lock), and every group of a client whose own
// heartbeat vanished within its TTL (Redis lost its data: beatLoop), and
// every group watching a client whose heartbeat's epoch moved on (it found
// a hold of its gone without giving it up, which no release tells:
// holdGone). A client that never beat (an older runtime) is never
// trusted.

// BeatEvery is how often a waiting client writes its heartbeat and reads
// those it watches; a waiting client's heartbeat lasts waitBeatTTL, a
// holding one's twice its leases' renewal period and a second.
const BeatEvery = 3 * time.Second

// waitBeatTTL is how long a waiting client's heartbeat lasts: a client
// stopped (or dead) is found lapsed within waitBeatTTL + BeatEvery.
const waitBeatTTL = 8 * time.Second

// WatchedRegistryTTL is how long a waiter of a watched group stays
// registered unrefreshed: a waiter whose client went away
// is passed over at once by a release, and one that stopped is passed over
// by its hand-off's end, so this only bounds how long an abandoned
// registry keeps its keys.
const WatchedRegistryTTL = 24 * time.Hour

// watchedEvery is how often a trusted group refreshes when its client has
// k watched groups: 30s per group, from a minute up to a third of
// WatchedRegistryTTL, so that a client's trusted refreshes cost about one
// script per 30s however many objects it waits on.
func watchedEvery(k int) time.Duration {
	return min(max(time.Duration(k)*30*time.Second, time.Minute), WatchedRegistryTTL/3)
}

// watchedSleep is how long a waiter of a watched group sleeps when
// nothing wakes it (groupedSleep's counterpart): its group does the
// looking.
const watchedSleep = WatchedRegistryTTL / 3

// holderBeat returns the heartbeat a renewal pipeline of batch carries
// (watchdog.RenewOn's also; a full pipeline has no room for it, and the
// caller sends it alone: see newWatchdog), or nil: unless a release
// cannot count a wake-up's receivers (only where it can are waits
// watched), at most one every BeatEvery, lasting twice the batch's
// longest renewal period and a second (at least waitBeatTTL), so that a
// client that holds stays alive between its renewals.
func (c *Client) holderBeat(ctx context.Context, batch []*watchdog.Held) func(redis.Pipeliner) {
	now := time.Now().UnixNano()
	last := c.beat.Load()
	// (A holder that never waited has not probed the pub/sub mode, and
	// must not stall its renewals on the probe: it beats.)
	blind := c.hub.Probed() && !c.conn.CountsReceivers()
	if now-last < int64(BeatEvery) || blind || !c.beat.CompareAndSwap(last, now) {
		return nil
	}
	var lease time.Duration
	for _, h := range batch {
		lease = max(lease, h.Renew.Lease)
	}
	ttl := max(waitBeatTTL, 2*watchdog.RenewEvery(lease)+time.Second)
	c.holdBeatTTL.Store(int64(ttl))
	epoch := c.epoch()
	return func(p redis.Pipeliner) { rdb.BeatOn(ctx, p, c.id, epoch, ttl) }
}

// epoch is the value of the client's heartbeat: one more than the holds
// it found gone without giving them up (see rdb.BeatOn).
func (c *Client) epoch() string { return strconv.FormatUint(c.losses.Load()+1, 10) }

// holdGone notes a hold of the client's found gone although it did not
// give it up: a renewal or a release found nothing (evicted under
// maxmemory, deleted by hand), or its renewals failed until its lease ran
// out. No release tells the waiters behind it, and while the client goes
// on beating for its other holds, a trusted group watching it would not
// look before its next refresh (watchedEvery, a minute to 8 h). So the
// heartbeat's epoch moves on, written at once (one SET; one write in
// flight at a time, which writes the newest epoch, however many holds
// went together), and a watcher that reads it changed looks at once
// (looked). A client that has not beaten is watched by nobody, and one
// whose releases cannot count receivers watches nobody: neither writes.
func (c *Client) holdGone() {
	c.losses.Add(1)
	if c.beat.Load() == 0 || (c.hub.Probed() && !c.conn.CountsReceivers()) {
		return
	}
	if !c.telling.CompareAndSwap(false, true) {
		return // the write under way writes the newest epoch after its own
	}
	go func() {
		for {
			epoch := c.epoch()
			ctx, cancel := context.WithTimeout(context.Background(), BeatEvery)
			pipe := c.rdb.Pipeline()
			// (As long as the client's heartbeat lasts, waiting or holding.)
			rdb.BeatOn(ctx, pipe, c.id, epoch, max(waitBeatTTL, time.Duration(c.holdBeatTTL.Load())))
			_, _ = pipe.Exec(ctx)
			cancel()
			c.telling.Store(false)
			if c.epoch() == epoch || c.hub.IsClosed() || !c.telling.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// releaseFoundNothing is holdGone for a release (Lease.Unlock,
// Permit.Release) whose script answered n < 0, nothing held, without an
// error, for a hold its client did not know lost: the hold vanished
// unseen.
func (c *Client) releaseFoundNothing(n int, err error, lost bool) {
	if n < 0 && err == nil && !lost {
		c.holdGone()
	}
}

// watched reports whether a group of r's may be trusted (regGroup.watched):
// its object names whom to watch (rdb.Registry.Watch), it is waited on
// with the client's registration TTL (a spec's WaiterTTL keeps its
// meaning), and a release counts a wake-up's receivers.
func (c *Client) watched(r *registration) bool {
	return r.reg.Watch != "" && r.ttl == LiveRegistryTTL && c.conn.CountsReceivers()
}

// aliveMonitor is the refresher's record of the clients its trusted
// groups watch (under refresher.mu).
type aliveMonitor struct {
	watchedGroups int // groups that may be trusted (regGroup.watched)
	clients       map[string]*watchedClient
	beating       bool // beatLoop runs
}

// watchedClient is one client watched, and the groups watching it.
type watchedClient struct {
	alive  bool   // its heartbeat was there at the last look
	epoch  string // its heartbeat's value then (Client.epoch)
	groups map[*regGroup]struct{}
}

// watchGroup makes g watch the clients of watch (its refresh's), and
// trusts it when every one of them was alive at the last look (f.mu held).
func (f *refresher) watchGroup(g *regGroup, watch []string) {
	if f.clients == nil {
		f.clients = map[string]*watchedClient{}
	}
	old := g.watch
	g.watch, g.trusted = watch, true
	for _, id := range watch {
		w := f.clients[id]
		if w == nil {
			w = &watchedClient{groups: map[*regGroup]struct{}{}}
			f.clients[id] = w
		}
		w.groups[g] = struct{}{}
		g.trusted = g.trusted && w.alive
	}
	// (Dropped after the new ones were added, so that a client watched
	// before and now keeps what the last look found.)
	for _, id := range old {
		if w := f.clients[id]; w != nil && !slices.Contains(watch, id) {
			delete(w.groups, g)
			if len(w.groups) == 0 {
				delete(f.clients, id)
			}
		}
	}
}

// unwatch drops g's watch and its trust (f.mu held).
func (f *refresher) unwatch(g *regGroup) {
	for _, id := range g.watch {
		if w := f.clients[id]; w != nil {
			delete(w.groups, g)
			if len(w.groups) == 0 {
				delete(f.clients, id)
			}
		}
	}
	g.watch, g.trusted = nil, false
}

// distrust ends the trust of r's group: its waiter's attempt failed, so
// someone the group does not watch may hold the lock, and the attempt
// registered the waiter again for the group's TTL. The group refreshes
// when its members' registrations are due as an untrusted group's.
func (c *Client) distrust(r *registration) {
	f := &c.regs
	f.mu.Lock()
	defer f.mu.Unlock()
	if g := r.group; g != nil && g.trusted && f.groups[g.key] == g {
		g.trusted = false
		g.timer.Reset(max(time.Until(g.due(f.watchedGroups)), 0))
	}
}

// startBeat starts the beat loop unless it runs (f.mu held).
func (c *Client) startBeat() {
	if c.regs.beating {
		return
	}
	c.regs.beating = true
	go c.beatLoop()
}

// beatLoop writes the client's heartbeat and reads the watched ones every
// BeatEvery while the client has watched groups. A heartbeat of its own
// found gone although its last write began less than its TTL ago (less
// a second) says Redis lost its data: every group then refreshes at once
// (lost), for the holds and registrations it trusted are gone too, and a
// watched client may have written its heartbeat again before the look.
func (c *Client) beatLoop() {
	f := &c.regs
	t := time.NewTicker(BeatEvery)
	defer t.Stop()
	var wrote time.Time // when the last successful write began
	for {
		f.mu.Lock()
		if f.watchedGroups == 0 || c.hub.IsClosed() {
			f.beating = false
			f.mu.Unlock()
			return
		}
		ids := make([]string, 0, len(f.clients))
		for id := range f.clients {
			ids = append(ids, id)
		}
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), BeatEvery)
		start := time.Now()
		// (As long as a holder's heartbeat lasts when the client holds.)
		seen, had, err := rdb.Beat(ctx, &c.conn, c.id, c.epoch(), max(waitBeatTTL, time.Duration(c.holdBeatTTL.Load())), ids)
		cancel()
		c.beat.Store(time.Now().UnixNano())
		if err == nil {
			if !had && !wrote.IsZero() && time.Since(wrote) < waitBeatTTL-time.Second {
				c.lost()
			}
			wrote = start
			c.looked(ids, seen)
		}
		select {
		case <-t.C:
		case <-c.hub.Closed():
		}
	}
}

// lost makes every group refresh at once, untrusted: Redis lost its data
// (beatLoop).
func (c *Client) lost() {
	f := &c.regs
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		g.trusted, g.urgent = false, true
		g.timer.Reset(0)
	}
}

// looked applies a look at the heartbeats of ids (seen: their epochs, ""
// for a heartbeat not there): a client found lapsed that was alive, or
// alive with another epoch (it found a hold of its gone: holdGone), makes
// every group watching it refresh at once; a group whose watched clients
// are all alive is trusted.
func (c *Client) looked(ids []string, seen []string) {
	f := &c.regs
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, id := range ids {
		w := f.clients[id]
		if w == nil {
			continue
		}
		if w.alive && seen[i] != w.epoch {
			for g := range w.groups {
				g.trusted, g.urgent = false, true
				g.timer.Reset(0)
			}
		}
		w.alive, w.epoch = seen[i] != "", seen[i]
	}
	for i, id := range ids {
		w := f.clients[id]
		if w == nil || seen[i] == "" {
			continue
		}
		for g := range w.groups {
			if g.trusted || g.urgent || f.groups[g.key] != g {
				continue
			}
			trusted := true
			for _, o := range g.watch {
				trusted = trusted && f.clients[o] != nil && f.clients[o].alive
			}
			if trusted {
				// (A watch of the hold's end, armed while untrusted,
				// is the watched clients' job now.)
				g.trusted, g.watching = true, false
				g.timer.Reset(jitter(time.Until(g.due(f.watchedGroups))))
			}
		}
	}
}
