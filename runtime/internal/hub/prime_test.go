package hub

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestPrimeEveryPrimary: on a cluster, the hub's first sharded
// subscription opens a pub/sub connection to every primary (prime), so
// that a channel whose slot sits on another primary is later subscribed
// and confirmed without a dial. The hub that opened a connection on a
// primary's first channel fails it: it has one connection after the first
// subscription, and the second one dials.
func TestPrimeEveryPrimary(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, 3)
	ctx := context.Background()
	var dials atomic.Int64
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, Dialer: redistest.CountingDialer(&dials)})
	defer rdb.Close()
	h := New(rdb, true)
	defer h.Close()

	// Two channels whose slots sit on different primaries.
	first := "prime:{a}"
	owner, err := rdb.MasterForKey(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	second := ""
	for i := 0; second == ""; i++ {
		ch := fmt.Sprintf("prime:{b%d}", i)
		n, err := rdb.MasterForKey(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		if n.Options().Addr != owner.Options().Addr {
			second = ch
		}
	}

	s1, err := h.Subscribe(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if !h.isReady(s1) {
		t.Fatalf("%s: not confirmed", first)
	}
	var mu sync.Mutex
	var primaries []string
	err = rdb.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		primaries = append(primaries, m.Options().Addr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range primaries {
		h.mu.Lock()
		pc := h.conns[addr]
		h.mu.Unlock()
		if pc == nil {
			t.Fatalf("no pub/sub connection to primary %s after the first subscription (the hub has %d)", addr, len(h.conns))
		}
		// A ping on the connection returns once it is up (it waits for a
		// dial under way).
		if err := pc.ps.Ping(ctx); err != nil {
			t.Fatalf("primary %s: %v", addr, err)
		}
	}

	before := dials.Load()
	s2, err := h.Subscribe(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if !h.isReady(s2) {
		t.Fatalf("%s: not confirmed", second)
	}
	if d := dials.Load() - before; d != 0 {
		t.Fatalf("subscribing %s on another primary dialed %d connections, want 0", second, d)
	}
}
