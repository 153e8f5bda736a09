package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// masterName is the name under which the sentinel monitors the primary.
const masterName = "redistest"

// sentinelTimeout bounds StartSentinel's wait for the deployment to be
// ready, and Failover's when its context has no deadline: longer than a
// Sentinel's TILT mode (30 s without acting, entered when its timer ran
// more than 2 s late: a starved process, seen beside two busy loops in
// the middle of a failover). A variable, so this package's tests can
// shorten it.
var sentinelTimeout = time.Minute

// Sentinel is a primary, one replica of it and one Sentinel process that
// monitors them, each a Node on a free port of 127.0.0.1 in a directory of
// its own. The sentinel fails over on its own (quorum 1) when the primary
// does not answer for a second (down-after-milliseconds 1000), and on
// demand through Failover.
type Sentinel struct {
	// Primary and Replica are the current primary and its replica.
	// Failover swaps them: do not read them while a Failover runs.
	Primary, Replica *Node
	// SentinelNode is the sentinel process: redis-server <conf> --sentinel,
	// its configuration (sentinel.conf, which the sentinel rewrites) in
	// SentinelNode.Dir. Stop, Kill and Restart work as for any Node.
	SentinelNode *Node
	SentinelAddr string // SentinelNode.Addr, for redis.FailoverOptions.SentinelAddrs
	MasterName   string // the primary's name at the sentinel, for redis.FailoverOptions.MasterName

	failover sync.Mutex // serializes Failover

	mu      sync.Mutex
	clients []*redis.Client
	closed  bool
}

// StartSentinel starts a primary, a replica of it (--replicaof) and a
// sentinel monitoring the primary, and returns once the replica is in sync
// (master_link_status:up, and a write reaches it) and the sentinel knows
// both nodes and could promote the replica; this takes about 250ms.
// Options apply to the primary and the replica, not to the sentinel; both
// also get --repl-diskless-sync no: a diskless sync waits 5s
// (repl-diskless-sync-delay) for more replicas, and then its stream starts
// only on the replica's next acknowledgement, up to a second later.
//
// It returns ErrNotFound when redis-server is not in PATH, and otherwise an
// error that says which step failed, with the sentinel's log when it is
// about the sentinel. On any error, the nodes already started are closed.
func StartSentinel(opts ...Option) (*Sentinel, error) {
	cfg := newConfig(opts)
	cfg.args = append([]string{"--repl-diskless-sync", "no"}, cfg.args...)
	s := &Sentinel{MasterName: masterName}
	ctx, cancel := context.WithTimeout(context.Background(), sentinelTimeout)
	defer cancel()
	if err := s.start(ctx, cfg); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sentinel) start(ctx context.Context, cfg config) error {
	var err error
	if s.Primary, err = start(cfg); err != nil {
		return err
	}
	rcfg := cfg
	rcfg.args = append(slices.Clone(cfg.args), "--replicaof", "127.0.0.1", strconv.Itoa(s.Primary.Port))
	if s.Replica, err = start(rcfg); err != nil {
		return err
	}
	if err := waitSynced(ctx, s.Replica, s.Primary); err != nil {
		return err
	}
	if s.SentinelNode, err = startSentinelNode(s.MasterName, s.Primary); err != nil {
		return err
	}
	s.SentinelAddr = s.SentinelNode.Addr
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddr, MaxRetries: -1})
	defer sc.Close()
	if err := tune(ctx, sc); err != nil {
		return fmt.Errorf("redistest: sentinel %s: %w", s.SentinelAddr, err)
	}
	if err := waitFor(ctx, func() error { return s.promotable(ctx, sc, s.Primary, s.Replica) }); err != nil {
		return fmt.Errorf("redistest: sentinel %s not ready: %w; log:\n%s", s.SentinelAddr, err, s.SentinelNode.logTail())
	}
	return nil
}

// infoPeriod is how often the sentinel sends INFO to the nodes; Redis's
// default is 10s.
const infoPeriod = time.Second

// tune sets the sentinel's INFO period (SENTINEL DEBUG, Redis 7.0 and
// later), which the configuration file cannot set. The sentinel learns
// from INFO that a replica is in sync, and promotes only a replica it
// has heard from lately: with the default, a node demoted by Failover
// could be promoted again only up to 10s later.
func tune(ctx context.Context, sc *redis.SentinelClient) error {
	err := sc.Process(ctx, redis.NewStatusCmd(ctx, "SENTINEL", "DEBUG", "INFO-PERIOD", infoPeriod.Milliseconds()))
	if err != nil {
		return fmt.Errorf("SENTINEL DEBUG INFO-PERIOD: %w", err)
	}
	return nil
}

// startSentinelNode starts a sentinel monitoring primary under name.
//
// A sentinel needs its configuration file as redis-server's first argument,
// but launch passes --port first; so the node's binary is a shell script in
// its directory that execs redis-server with the file and --sentinel ahead
// of launch's arguments. exec keeps the process (its pid, which
// readiness probes compare, and its Pdeathsig), and Restart works as for
// any node.
func startSentinelNode(name string, primary *Node) (*Node, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotFound
	}
	dir, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	conf := filepath.Join(dir, "sentinel.conf")
	wrapper := filepath.Join(dir, "redis-sentinel")
	err = errors.Join(
		os.WriteFile(conf, fmt.Appendf(nil,
			"sentinel monitor %[1]s 127.0.0.1 %[2]d 1\n"+
				"sentinel down-after-milliseconds %[1]s 1000\n"+
				"sentinel failover-timeout %[1]s 5000\n",
			name, primary.Port), 0o644),
		os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+shQuote(bin)+" "+shQuote(conf)+` --sentinel "$@"`+"\n"), 0o755),
	)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redistest: %w", err)
	}
	n := &Node{Dir: dir, bin: wrapper, args: []string{
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
	}}
	return n.launchOnFreePort(false)
}

// shQuote quotes s for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// waitFor calls f every 20ms until it returns nil. When ctx ends first, it
// returns f's last error and ctx's.
func waitFor(ctx context.Context, f func() error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-tick.C:
		}
	}
}

// waitSynced waits until replica reports its link to primary up and
// primary streams its writes to it: the link can be up before the stream
// flows (after a diskless sync, Redis 7.0 starts the stream on the
// replica's next REPLCONF ACK, up to a second later), and writes made
// meanwhile would be missing on the replica if it were promoted. So
// waitSynced also PUBLISHes, which is replicated and touches no key, and
// WAITs until a replica acknowledges it.
func waitSynced(ctx context.Context, replica, primary *Node) error {
	rdb := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	defer rdb.Close()
	err := waitFor(ctx, func() error {
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		for _, field := range []string{"role:slave", "master_port:" + strconv.Itoa(primary.Port), "master_link_status:up"} {
			if !strings.Contains(info, field+"\r\n") {
				return fmt.Errorf("INFO replication lacks %s", field)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: replica %s not in sync with %s: %w", replica.Addr, primary.Addr, err)
	}
	prdb := redis.NewClient(&redis.Options{Addr: primary.Addr, MaxRetries: -1})
	defer prdb.Close()
	err = waitFor(ctx, func() error {
		if err := prdb.Publish(ctx, "redistest:sync", "").Err(); err != nil {
			return fmt.Errorf("PUBLISH: %w", err)
		}
		n, err := prdb.Wait(ctx, 1, 100*time.Millisecond).Result()
		if err != nil {
			return fmt.Errorf("WAIT: %w", err)
		}
		if n < 1 {
			return errors.New("no replica acknowledged a write")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: %s does not stream to replica %s: %w", primary.Addr, replica.Addr, err)
	}
	return nil
}

// promotable returns nil if the sentinel monitors primary, healthy, and
// sees replica as a replica it can promote: connected, and reporting its
// link to the primary up. SENTINEL FAILOVER fails with NOGOODSLAVE
// otherwise.
func (s *Sentinel) promotable(ctx context.Context, sc *redis.SentinelClient, primary, replica *Node) error {
	m, err := sc.Master(ctx, s.MasterName).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL MASTER %s: %w", s.MasterName, err)
	}
	if addr := net.JoinHostPort(m["ip"], m["port"]); addr != primary.Addr || m["flags"] != "master" {
		return fmt.Errorf("sentinel sees primary %s with flags %q, want %s with flags \"master\"", addr, m["flags"], primary.Addr)
	}
	replicas, err := sc.Replicas(ctx, s.MasterName).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS %s: %w", s.MasterName, err)
	}
	for _, r := range replicas {
		if net.JoinHostPort(r["ip"], r["port"]) != replica.Addr {
			continue
		}
		if r["flags"] != "slave" || r["master-link-status"] != "ok" {
			return fmt.Errorf("sentinel sees replica %s with flags %q and master-link-status %q, want \"slave\" and \"ok\"",
				replica.Addr, r["flags"], r["master-link-status"])
		}
		return nil
	}
	return fmt.Errorf("sentinel does not know replica %s yet", replica.Addr)
}

// Failover has the sentinel promote the replica (SENTINEL FAILOVER) and
// returns once the sentinel has switched to it (SENTINEL MASTER), it
// answers ROLE as master, and the former primary replicates it, in sync.
// Primary and Replica are then swapped. It takes about a second.
//
// Before asking, Failover waits until the sentinel could promote the
// replica: after a previous Failover, that takes up to a second, the
// sentinel's INFO period (shortened from Redis's 10s). After the switch,
// it demotes the former primary as the sentinel would (REPLICAOF the new
// primary, then it disconnects the node's clients), but at once rather
// than seconds later: so there is no window in which both nodes accept
// writes, and a client that has not yet learned of the switch gets an
// error (go-redis then reconnects to the new primary) instead of writing
// where the write would be lost.
//
// Failover requires a healthy deployment: all three nodes running, the
// sentinel seeing both data nodes. If ctx has no deadline, it gives up
// after a minute (a sentinel in TILT mode finishes the failover only
// after it). It returns ErrClosed after Close, and otherwise an error that
// says which step did not complete, with the sentinel's log.
func (s *Sentinel) Failover(ctx context.Context) error {
	s.failover.Lock()
	defer s.failover.Unlock()
	s.mu.Lock()
	closed, old, next := s.closed, s.Primary, s.Replica
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sentinelTimeout)
		defer cancel()
	}
	fail := func(step string, err error) error {
		return fmt.Errorf("redistest: failover of %s from %s to %s: %s: %w; sentinel log:\n%s",
			s.MasterName, old.Addr, next.Addr, step, err, s.SentinelNode.logTail())
	}

	sc := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddr, MaxRetries: -1})
	defer sc.Close()
	if err := tune(ctx, sc); err != nil { // again: lost if the sentinel restarted
		return fail("tuning the sentinel", err)
	}
	if err := waitFor(ctx, func() error { return s.promotable(ctx, sc, old, next) }); err != nil {
		return fail("waiting for a promotable replica", err)
	}
	if err := sc.Failover(ctx, s.MasterName).Err(); err != nil {
		return fail("SENTINEL FAILOVER", err)
	}

	nc := redis.NewClient(&redis.Options{Addr: next.Addr, MaxRetries: -1})
	defer nc.Close()
	err := waitFor(ctx, func() error {
		// SENTINEL GET-MASTER-ADDR-BY-NAME reports the promoted replica
		// already while the failover is in progress; SENTINEL MASTER, once
		// the sentinel has switched.
		m, err := sc.Master(ctx, s.MasterName).Result()
		if err != nil {
			return fmt.Errorf("SENTINEL MASTER %s: %w", s.MasterName, err)
		}
		if got := net.JoinHostPort(m["ip"], m["port"]); got != next.Addr || m["flags"] != "master" {
			return fmt.Errorf("sentinel reports %s as primary, with flags %q", got, m["flags"])
		}
		role, err := nc.Do(ctx, "ROLE").Slice()
		if err != nil {
			return fmt.Errorf("ROLE: %w", err)
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s answers ROLE %v", next.Addr, role)
		}
		return nil
	})
	if err != nil {
		return fail("waiting for the switch", err)
	}

	if err := demote(ctx, old, next); err != nil {
		return fail("demoting the former primary", err)
	}
	if err := waitSynced(ctx, old, next); err != nil {
		return fail("waiting for the former primary to sync", err)
	}

	s.mu.Lock()
	s.Primary, s.Replica = next, old
	s.mu.Unlock()
	return nil
}

// demote makes old a replica of next and disconnects its clients, as the
// sentinel's own demotion does (CLIENT KILL TYPE normal, TYPE pubsub), and
// like it spares the sentinel's links (which there send the command).
func demote(ctx context.Context, old, next *Node) error {
	rdb := redis.NewClient(&redis.Options{Addr: old.Addr, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(next.Port)).Err(); err != nil {
		return fmt.Errorf("REPLICAOF: %w", err)
	}
	id, err := rdb.ClientID(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLIENT ID: %w", err)
	}
	list, err := rdb.ClientList(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLIENT LIST: %w", err)
	}
	for line := range strings.Lines(list) {
		var cid, name, flags string
		for f := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "id":
				cid = v
			case "name":
				name = v
			case "flags":
				flags = v
			}
		}
		// Flag M marks the link to next, S a replica's.
		if cid == "" || cid == strconv.FormatInt(id, 10) || strings.HasPrefix(name, "sentinel-") ||
			strings.ContainsAny(flags, "MS") {
			continue
		}
		// The client may have gone meanwhile: ignore "No such client".
		rdb.ClientKillByFilter(ctx, "ID", cid)
	}
	return nil
}

// Client returns a new go-redis failover client: it asks the sentinel for
// the primary's address and follows it across failovers. Close closes it;
// the caller may close it earlier.
func (s *Sentinel) Client() *redis.Client {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    s.MasterName,
		SentinelAddrs: []string{s.SentinelAddr},
	})
	s.mu.Lock()
	s.clients = append(s.clients, rdb)
	s.mu.Unlock()
	return rdb
}

// Close closes the clients made by Client and closes the three nodes (see
// Node.Close): processes stopped, directories removed. It is final; to take
// one node down and up again, use its Stop or Kill, then Restart. It
// returns the nodes' errors; closing a closed Sentinel returns nil.
func (s *Sentinel) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, rdb := range s.clients {
		rdb.Close() // may already be closed by its user
	}
	s.clients = nil
	// The sentinel first, so that it does not fail over while the
	// primary stops.
	err := closeAll([]*Node{s.SentinelNode})
	return errors.Join(err, closeAll([]*Node{s.Primary, s.Replica}))
}

// Stop is Close, named as Cluster.Stop.
func (s *Sentinel) Stop() error { return s.Close() }

// NewSentinel starts a primary, a replica and a sentinel for t (see
// StartSentinel) and closes them when the test ends, logging the tail of
// each node's log first if t has failed. It fails t with t.Fatal when they
// cannot be started.
func NewSentinel(t testing.TB, opts ...Option) *Sentinel {
	t.Helper()
	s, err := StartSentinel(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range []*Node{s.Primary, s.Replica, s.SentinelNode} {
				t.Logf("redistest: %s:\n%s", n.Addr, n.logTail())
			}
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}
