package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func ping(t *testing.T, rdb redis.Cmdable) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
}

// portClosed fails t unless nothing accepts connections on addr.
func portClosed(t *testing.T, addr string) {
	t.Helper()
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections", addr)
	}
}

func TestNodeLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := Single(t)
	if n.Addr != fmt.Sprintf("127.0.0.1:%d", n.Port) {
		t.Fatalf("Addr %q does not match Port %d", n.Addr, n.Port)
	}
	rdb := n.Client()
	ping(t, rdb)
	if !n.Running() {
		t.Fatal("Running() = false for a started node")
	}
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"save", ""}, {"appendonly", "no"}, {"bind", "127.0.0.1"}} {
		if got := rdb.ConfigGet(ctx, kv[0]).Val()[kv[0]]; got != kv[1] {
			t.Errorf("CONFIG GET %s = %q, want %q", kv[0], got, kv[1])
		}
	}

	// Stop: graceful, port closed, idempotent.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	portClosed(t, n.Addr)
	if n.Running() {
		t.Fatal("Running() = true after Stop")
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	// Restart: same port, same client works, data is gone.
	port := n.Port
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	if n.Port != port {
		t.Fatalf("Restart moved the node from port %d to %d", port, n.Port)
	}
	ping(t, rdb)
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after Stop+Restart: err = %v, want redis.Nil (no persistence)", err)
	}

	// Kill: like a crash; port closed; idempotent; Restart again.
	if err := rdb.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	portClosed(t, n.Addr)
	if err := n.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	ping(t, rdb)
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after Kill+Restart: err = %v, want redis.Nil", err)
	}

	// Restart of a running node stops it first.
	if err := rdb.Set(ctx, "k", "v3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	ping(t, rdb)
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("DBSIZE after Restart = %d, want 0", n)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	n, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	rdb := n.Client()
	ping(t, rdb)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	portClosed(t, n.Addr)
	if _, err := os.Stat(n.Dir); !os.IsNotExist(err) {
		t.Errorf("Dir %s survives Close: %v", n.Dir, err)
	}
	if err := rdb.Ping(context.Background()).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("PING on a client after Close: %v, want redis.ErrClosed", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := n.Restart(); !errors.Is(err, ErrClosed) {
		t.Errorf("Restart after Close: %v, want ErrClosed", err)
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	n := Single(t, WithArgs("--maxmemory", "10mb", "--enable-debug-command", "no"))
	rdb := n.Client()
	ctx := context.Background()
	if got := rdb.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]; got != "10485760" {
		t.Errorf("maxmemory = %q, want 10485760", got)
	}
	if got := rdb.ConfigGet(ctx, "enable-debug-command").Val()["enable-debug-command"]; got != "no" {
		t.Errorf("enable-debug-command = %q, want no (WithArgs overrides defaults)", got)
	}
}

func TestStartFailsWithLog(t *testing.T) {
	t.Parallel()
	_, err := Start(WithArgs("--no-such-option", "1"))
	if err == nil {
		t.Fatal("Start with a bad option succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-option") {
		t.Errorf("error does not show redis-server's complaint:\n%v", err)
	}
}

func TestRestartOnTakenPort(t *testing.T) {
	n := Single(t)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	old := restartWait
	restartWait = 100 * time.Millisecond
	defer func() { restartWait = old }()
	err = n.Restart()
	if !errors.Is(err, errAddrInUse) || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("Restart on a taken port: %v, want an address-in-use error with the log", err)
	}
	l.Close()
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	ping(t, n.Client())
}

func TestNotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := Start(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Start without redis-server: %v, want ErrNotFound", err)
	}
	if _, err := StartNodes(2); !errors.Is(err, ErrNotFound) {
		t.Errorf("StartNodes without redis-server: %v, want ErrNotFound", err)
	}
	if _, err := StartCluster(3); !errors.Is(err, ErrNotFound) {
		t.Errorf("StartCluster without redis-server: %v, want ErrNotFound", err)
	}
	if !strings.Contains(ErrNotFound.Error(), "make redis") {
		t.Errorf("ErrNotFound does not say how to install: %v", ErrNotFound)
	}
}

func TestIndependent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nodes := Independent(t, 5)
	if len(nodes) != 5 {
		t.Fatalf("got %d nodes, want 5", len(nodes))
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		if seen[n.Addr] {
			t.Fatalf("address %s used twice", n.Addr)
		}
		seen[n.Addr] = true
		rdb := n.Client()
		ping(t, rdb)
		if err := rdb.Set(ctx, "who", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range nodes {
		if got, err := n.Client().Get(ctx, "who").Int(); err != nil || got != i {
			t.Errorf("node %d: GET who = %d, %v; want %d (nodes must not share data)", i, got, err, i)
		}
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	began := time.Now()
	c := NewCluster(t, 3)
	t.Logf("3-primary cluster ready in %v", time.Since(began))
	if len(c.Nodes) != 3 || len(c.Addrs) != 3 {
		t.Fatalf("got %d nodes and %d addrs, want 3", len(c.Nodes), len(c.Addrs))
	}

	for _, n := range c.Nodes {
		info := n.Client().ClusterInfo(ctx).Val()
		for _, want := range []string{"cluster_state:ok", "cluster_known_nodes:3", "cluster_size:3"} {
			if !strings.Contains(info, want+"\r\n") {
				t.Errorf("%s: CLUSTER INFO lacks %s:\n%s", n.Addr, want, info)
			}
		}
	}

	rdb := c.Client()
	const keys = 500
	slots := map[int64]bool{}
	for i := range keys {
		key := fmt.Sprintf("key:%d", i)
		slots[rdb.ClusterKeySlot(ctx, key).Val()] = true
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	if len(slots) < keys*9/10 {
		t.Fatalf("only %d distinct slots for %d keys", len(slots), keys)
	}
	for i := range keys {
		key := fmt.Sprintf("key:%d", i)
		if got, err := rdb.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", key, got, err, i)
		}
	}
	var total int64
	for _, n := range c.Nodes {
		size := n.Client().DBSize(ctx).Val()
		if size == 0 {
			t.Errorf("%s holds no keys: slots are not spread", n.Addr)
		}
		total += size
	}
	if total != keys {
		t.Errorf("nodes hold %d keys in all, want %d", total, keys)
	}

	// A killed node comes back with its slots (nodes.conf survives), and a
	// key in its slot range (5461..10922) is writable again.
	victim := c.Nodes[1]
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster ready %v after a node's restart", time.Since(began))
	var key string
	for i := 0; ; i++ {
		key = fmt.Sprintf("k%d", i)
		if s := rdb.ClusterKeySlot(ctx, key).Val(); s >= 5461 && s <= 10922 {
			break
		}
	}
	if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET %s on the restarted node: %v", key, err)
	}
	if got := victim.Client().Get(ctx, key).Val(); got != "v" {
		t.Fatalf("restarted node does not hold %s: %q", key, got)
	}
}

func TestStartClusterArgs(t *testing.T) {
	if _, err := StartCluster(0); err == nil {
		t.Error("StartCluster(0) succeeded")
	}
	if _, err := StartNodes(0); err == nil {
		t.Error("StartNodes(0) succeeded")
	}
}

// A one-primary cluster serves every slot; Stop closes client and bus ports.
func TestSingleClusterStop(t *testing.T) {
	t.Parallel()
	c, err := StartCluster(1)
	if err != nil {
		t.Fatal(err)
	}
	rdb := c.Client()
	ping(t, rdb)
	if err := rdb.Set(context.Background(), "a", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		portClosed(t, n.Addr)
		portClosed(t, fmt.Sprintf("127.0.0.1:%d", n.Port+10000))
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// A node does not outlive a test binary that panics without cleaning up.
func TestChildDiesWithParent(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") == "1" {
		n, err := Start()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("addr=%s dir=%s\n", n.Addr, n.Dir)
		panic("the test binary dies without cleanups")
	}
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux-only")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithParent$")
	cmd.Env = append(os.Environ(), "REDISTEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("child test binary did not panic:\n%s", out)
	}
	_, rest, ok := strings.Cut(string(out), "addr=")
	if !ok {
		t.Fatalf("child printed no address:\n%s", out)
	}
	var addr, dir string
	if _, err := fmt.Sscanf(rest, "%s dir=%s", &addr, &dir); err != nil {
		t.Fatalf("parsing child output: %v\n%s", err, out)
	}
	defer os.RemoveAll(dir)
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // closed: redis-server died with its parent
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s outlived its test binary", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMigrateSlot: a slot moves with its keys to another primary, and
// back; a cluster client finds the key at each step.
func TestMigrateSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewCluster(t, 3)
	rdb := c.Client()
	const key = "{migrate}k"
	slot := int(rdb.ClusterKeySlot(ctx, key).Val())
	if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []int{(from + 1) % 3, from} {
		if err := c.MigrateSlot(ctx, slot, to); err != nil {
			t.Fatal(err)
		}
		if got, err := c.SlotOwner(ctx, slot); err != nil || got != to {
			t.Fatalf("slot %d owned by node %d (%v), want %d", slot, got, err, to)
		}
		n := c.Nodes[to].Client()
		if got, err := n.Get(ctx, key).Result(); err != nil || got != "v" {
			t.Fatalf("GET on node %d after migrating: %q, %v", to, got, err)
		}
		if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "v" {
			t.Fatalf("cluster GET after migrating to node %d: %q, %v", to, got, err)
		}
	}
}

// TestClusterReplicas: 3 primaries with a replica each; killing a primary
// promotes its replica, which then serves the primary's slots, with the
// keys written before the kill (WAIT made sure the replica had them).
func TestClusterReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	began := time.Now()
	c := NewCluster(t, 3, WithReplicas(1), WithArgs("--cluster-node-timeout", "2000"))
	t.Logf("3-primary, 3-replica cluster ready in %v", time.Since(began))
	if len(c.Nodes) != 3 || len(c.Replicas) != 3 || len(c.Addrs) != 6 {
		t.Fatalf("got %d primaries, %d replicas, %d addrs; want 3, 3, 6", len(c.Nodes), len(c.Replicas), len(c.Addrs))
	}
	for i, r := range c.Replicas {
		repl := r.Client().Info(ctx, "replication").Val()
		if want := fmt.Sprintf("master_port:%d\r\n", c.Nodes[i].Port); !strings.Contains(repl, "role:slave\r\n") || !strings.Contains(repl, want) {
			t.Fatalf("replica %s is not a replica of %s:\n%s", r.Addr, c.Nodes[i].Addr, repl)
		}
	}
	rdb := c.Client()
	// A key in primary 1's slots (5461..10922), on its replica too.
	var key string
	for i := 0; ; i++ {
		key = fmt.Sprintf("k%d", i)
		if s := rdb.ClusterKeySlot(ctx, key).Val(); s >= 5461 && s <= 10922 {
			break
		}
	}
	if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Nodes[1].Client().Wait(ctx, 1, time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d, %v", n, err)
	}
	old, replica := c.Nodes[1], c.Replicas[1]
	began = time.Now()
	promoted, err := c.KillPrimary(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica promoted and cluster agreed %v after the kill", time.Since(began))
	if promoted != replica || c.Nodes[1] != replica || c.Replicas[1] != old || old.Running() {
		t.Fatalf("after KillPrimary: promoted %s, Nodes[1] %s, Replicas[1] %s", promoted.Addr, c.Nodes[1].Addr, c.Replicas[1].Addr)
	}
	// A fresh client learns the new map and finds the key on the new
	// primary.
	fresh := c.Client()
	if got, err := fresh.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("GET %s after the failover = %q, %v", key, got, err)
	}
	if err := fresh.Set(ctx, key, "w", 0).Err(); err != nil {
		t.Fatalf("SET %s after the failover: %v", key, err)
	}
	// The killed primary comes back as a replica of the promoted one.
	if err := old.Restart(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KillPrimary(ctx, 7); err == nil {
		t.Error("KillPrimary of a primary that does not exist succeeded")
	}
}
