package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// role returns the first element of ROLE on n: "master" or "slave".
func role(t *testing.T, n *Node) string {
	t.Helper()
	r, err := n.Client().Do(context.Background(), "ROLE").Slice()
	if err != nil || len(r) == 0 {
		t.Fatalf("ROLE on %s: %v, %v", n.Addr, r, err)
	}
	s, _ := r[0].(string)
	return s
}

// replicated fails t unless n holds key with value want, waiting a little:
// replication is asynchronous.
func replicated(t *testing.T, n *Node, key, want string) {
	t.Helper()
	rdb := n.Client()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := rdb.Get(context.Background(), key).Result()
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: GET %s = %q, %v; want %q", n.Addr, key, got, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSentinel writes through a failover client, fails over, and writes
// again through the same client, which follows the new primary.
func TestSentinel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	began := time.Now()
	s := NewSentinel(t)
	t.Logf("primary, replica and sentinel ready in %v", time.Since(began))
	if s.SentinelAddr != s.SentinelNode.Addr || s.MasterName == "" {
		t.Fatalf("SentinelAddr %q, SentinelNode.Addr %q, MasterName %q", s.SentinelAddr, s.SentinelNode.Addr, s.MasterName)
	}
	if got := role(t, s.Primary); got != "master" {
		t.Fatalf("Primary's ROLE is %s", got)
	}
	if got := role(t, s.Replica); got != "slave" {
		t.Fatalf("Replica's ROLE is %s", got)
	}

	rdb := s.Client()
	if err := rdb.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := s.Primary.Client().Get(ctx, "k").Val(); got != "before" {
		t.Fatalf("the failover client did not write to the primary: GET k = %q", got)
	}
	replicated(t, s.Replica, "k", "before")

	old := s.Primary
	began = time.Now()
	if err := s.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover in %v", time.Since(began))
	if s.Primary == old || s.Replica != old {
		t.Fatal("Failover did not swap Primary and Replica")
	}
	if got := role(t, s.Primary); got != "master" {
		t.Fatalf("new primary's ROLE is %s", got)
	}
	if got := role(t, s.Replica); got != "slave" {
		t.Fatalf("former primary's ROLE is %s", got)
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddr})
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil || net.JoinHostPort(addr[0], addr[1]) != s.Primary.Addr {
		t.Fatalf("sentinel's primary = %v, %v; want %s", addr, err, s.Primary.Addr)
	}

	// The same client writes to the new primary, which replicates to the
	// former one.
	if got := rdb.Get(ctx, "k").Val(); got != "before" {
		t.Fatalf("GET k after failover = %q, want the replicated %q", got, "before")
	}
	if err := rdb.Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("SET after failover: %v", err)
	}
	if got := s.Primary.Client().Get(ctx, "k").Val(); got != "after" {
		t.Fatalf("new primary: GET k = %q, want %q", got, "after")
	}
	replicated(t, s.Replica, "k", "after")

	// And back: the demoted node can be promoted again.
	began = time.Now()
	if err := s.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover back in %v", time.Since(began))
	if s.Primary != old {
		t.Fatalf("second Failover: Primary is %s, want %s", s.Primary.Addr, old.Addr)
	}
	if err := rdb.Set(ctx, "k", "back", 0).Err(); err != nil {
		t.Fatalf("SET after failing back: %v", err)
	}
	if got := old.Client().Get(ctx, "k").Val(); got != "back" {
		t.Fatalf("primary after failing back: GET k = %q, want %q", got, "back")
	}

	// The sentinel failed over when asked only: it never took a node for
	// down.
	slog, err := os.ReadFile(filepath.Join(s.SentinelNode.Dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(slog), "+sdown") {
		t.Errorf("the sentinel took a node for down:\n%s", slog)
	}
}

// TestSentinelClose stops every process, removes every directory, closes
// the clients, and is idempotent.
func TestSentinelClose(t *testing.T) {
	t.Parallel()
	s, err := StartSentinel()
	if err != nil {
		t.Fatal(err)
	}
	rdb := s.Client()
	ping(t, rdb)
	nodes := []*Node{s.Primary, s.Replica, s.SentinelNode}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		portClosed(t, n.Addr)
		if _, err := os.Stat(n.Dir); !os.IsNotExist(err) {
			t.Errorf("Dir %s survives Close: %v", n.Dir, err)
		}
	}
	if err := rdb.Ping(context.Background()).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("PING on a client after Close: %v, want redis.ErrClosed", err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("Stop after Close: %v", err)
	}
	if err := s.Failover(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Failover after Close: %v, want ErrClosed", err)
	}
}

func TestSentinelNotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := StartSentinel(); !errors.Is(err, ErrNotFound) {
		t.Errorf("StartSentinel without redis-server: %v, want ErrNotFound", err)
	}
}
