package runtime

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A hand-off message says when, by the server's clock, the hand-off's
// lease started (" t<ms>", see handed_at in templates/registry.luainc).
// With the server's clock known to within a few milliseconds, a waiter
// tells how long the hand-off lasts in Redis however long it waited
// (Redis expires the key by that same clock), and takes a fresh message
// at its word without another call; without it, it counts the hand-off
// from its last attempt (handoffTrust), which a wait longer than the
// hand-off lease has left behind. The client samples each primary's
// clock with one TIME when a wait there starts and its sample is older
// than clockMaxAge (serverClocks).

// clockMaxAge is how long a sample of a server's clock is used: clocks
// drift apart by at most a few milliseconds in that time (clockMargin).
const clockMaxAge = time.Minute

// clockMargin is what a hand-off's start is moved earlier by, beyond the
// sample's own uncertainty: the clocks' drift since the sample.
const clockMargin = 20 * time.Millisecond

// serverClocks are a client's samples of its primaries' clocks, by
// address.
type serverClocks struct {
	mu      sync.Mutex
	samples map[string]*clockSample
}

// clockSample is one server's clock against this process's: server time
// is local time plus offset, to within uncertainty.
type clockSample struct {
	offset, uncertainty time.Duration
	at                  time.Time // when taken (zero: none yet)
	sampling            bool      // a TIME is under way
}

// sampleClock makes sure the clock of the primary serving key is sampled
// recently, sampling it in the background (one TIME) when it is not.
func (c *Client) sampleClock(key string) {
	primary, addr := c.primaryAddr(key)
	if primary == nil {
		return
	}
	f := &c.clocks
	f.mu.Lock()
	if f.samples == nil {
		f.samples = map[string]*clockSample{}
	}
	s := f.samples[addr]
	if s == nil {
		s = &clockSample{}
		f.samples[addr] = s
	}
	if s.sampling || !s.at.IsZero() && time.Since(s.at) < clockMaxAge {
		f.mu.Unlock()
		return
	}
	s.sampling = true
	f.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		before := time.Now()
		t, err := primary.Time(ctx).Result()
		after := time.Now()
		f.mu.Lock()
		defer f.mu.Unlock()
		s.sampling = false // (on an error, asked again by the next wait)
		if err == nil {
			half := after.Sub(before) / 2
			s.offset, s.uncertainty, s.at = t.Sub(before.Add(half)), half, after
		}
	}()
}

// handedAt returns the local time a hand-off that started at server
// time ms (by the clock of the primary serving key) started at the
// earliest, and whether the client knows that server's clock.
func (c *Client) handedAt(key string, ms int64) (time.Time, bool) {
	_, addr := c.primaryAddr(key)
	f := &c.clocks
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.samples[addr]
	if s == nil || s.at.IsZero() || time.Since(s.at) > 2*clockMaxAge {
		return time.Time{}, false
	}
	return time.UnixMilli(ms).Add(-s.offset - s.uncertainty - clockMargin), true
}

// primaryAddr returns the client of the primary serving key and its
// address ("" for the one primary), or nil when a cluster's slot map is
// not known yet.
func (c *Client) primaryAddr(key string) (redis.Cmdable, string) {
	cc, ok := c.rdb.(*redis.ClusterClient)
	if !ok {
		return c.rdb, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, ""
	}
	return node, node.Options().Addr
}

// handoffTold splits a hand-off message's rest into what comes before
// its " l<ms>" (the lease the hand-off gave, told for a lock the
// watchdog does not renew: see hand_on in templates/registry.luainc) and
// that lease, 0 when the message does not tell it.
func handoffTold(rest string) (string, time.Duration) {
	i := strings.LastIndex(rest, " l")
	if i < 0 {
		return rest, 0
	}
	ms, err := strconv.ParseInt(rest[i+2:], 10, 64)
	if err != nil {
		return rest, 0
	}
	return rest[:i], time.Duration(ms) * time.Millisecond
}

// handoffTime splits a hand-off message's " t<ms>" off rest (what follows
// the owner in it): the rest before it, and the server time, or 0 when
// the message carries none.
func handoffTime(rest string) (string, int64) {
	i := strings.LastIndex(rest, " t")
	if i < 0 {
		return rest, 0
	}
	ms, err := strconv.ParseInt(rest[i+2:], 10, 64)
	if err != nil {
		return rest, 0
	}
	return rest[:i], ms
}
