package runtime

import (
	"testing"
	"time"
)

// TestRefreshWatchesHoldEndingNow: a group's refresh that reads a hold
// with less than a millisecond left (PTTL 0) looks again just after it
// ends, as for any hold it watches; it once took it for a hold without
// an end and slept a third of the registry TTL (10 s on a Redis that
// counts receivers), past a 5 s wait (TestUnlockByNonOwner/cluster under
// load).
func TestRefreshWatchesHoldEndingNow(t *testing.T) {
	for _, tc := range []struct {
		pttl  time.Duration
		head  bool
		short bool
		watch bool
	}{
		{pttl: 0, short: true, watch: true},
		{pttl: 0, head: true, watch: true},
		{pttl: 500 * time.Millisecond, head: true, watch: true},
		{pttl: -2 * time.Millisecond, head: true, watch: false}, // gone: its end was seen
		{pttl: -1 * time.Millisecond, head: true, watch: false}, // no TTL: no end to watch
		{pttl: 500 * time.Millisecond, watch: false},            // a hand-off's hold, another's head
	} {
		g := &regGroup{ttl: LiveRegistryTTL, short: tc.short}
		d := g.next(tc.pttl, tc.head)
		if g.watching != tc.watch {
			t.Errorf("pttl %v head %v short %v: watching = %v, want %v", tc.pttl, tc.head, tc.short, g.watching, tc.watch)
		}
		if tc.watch && d > tc.pttl+10*time.Millisecond {
			t.Errorf("pttl %v: next refresh in %v, want by the hold's end (+10ms)", tc.pttl, d)
		}
		if !tc.watch && d < LiveRegistryTTL/3*9/10 {
			t.Errorf("pttl %v: next refresh in %v, want a third of the TTL", tc.pttl, d)
		}
	}
}
