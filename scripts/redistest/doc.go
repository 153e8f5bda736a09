// Package redistest starts real redis-server processes for tests and
// benchmarks, on free ports, and cleans up after them. The ports are
// picked below the kernel's ephemeral range, so that a node killed and
// restarted finds its port free: no client's outgoing connection, and no
// other test's port from the kernel, takes it while the node is down.
//
// There are no mocks: every Node is a redis-server child process listening on
// 127.0.0.1 with persistence off (--save "" --appendonly no), its working
// directory, log file (redis.log) and captured stdout/stderr (redis.out) in a
// fresh temporary directory. The redis-server binary is found in PATH; if it
// is missing, Start returns ErrNotFound, whose message says how to install it
// (`make redis`).
//
// # In a test
//
// The helpers take a testing.TB, fail the test (t.Fatal, never t.Skip) when
// Redis cannot be started, and register t.Cleanup to stop the processes and
// remove their directories. When the test has failed, the cleanup logs the
// tail of each node's log.
//
//	func TestLock(t *testing.T) {
//		n := redistest.Single(t)           // one standalone node
//		rdb := n.Client()                  // *redis.Client, closed at cleanup
//		...
//	}
//
//	func TestLockOnCluster(t *testing.T) {
//		c := redistest.NewCluster(t, 3)    // 3 primaries, all 16384 slots served
//		rdb := c.Client()                  // *redis.ClusterClient
//		...
//	}
//
//	func TestRedLock(t *testing.T) {
//		nodes := redistest.Independent(t, 5) // 5 unrelated standalone nodes
//		...
//	}
//
// A cluster takes about 2.1s to start, almost all of it Redis's own: a
// primary does not report cluster_state:ok until 2s after it first computes
// its state (CLUSTER_WRITABLE_DELAY, hard-coded in cluster.c). Forming it
// (slots, MEET, agreement) takes under 200ms. Mark cluster tests
// t.Parallel, or share one cluster between the tests of a package (below).
//
// Fault tests use the node's lifecycle: Stop (graceful), Kill (SIGKILL, like
// a crash) and Restart (same port, same directory). Clients made by Client
// keep working across a restart: go-redis reconnects to the same address.
// Data does not survive a restart, since persistence is off; cluster nodes keep
// their identity and slots, because nodes.conf stays in the node's directory.
//
//	n.Kill()               // the holder's Redis crashes
//	...                    // assert what clients see
//	if err := n.Restart(); err != nil { t.Fatal(err) }
//
// # Sentinel
//
// NewSentinel (StartSentinel outside tests) starts a primary, one replica
// and one sentinel (redis-server --sentinel, quorum 1, down-after 1s)
// monitoring them, in about 250ms; it returns once the replica is in sync
// and the sentinel could promote it. Client returns a go-redis failover
// client, which asks the sentinel for the primary and follows it. Failover
// promotes the replica through the sentinel, demotes the former primary at
// once, and swaps Primary and Replica; it takes about a second.
//
//	func TestLockOnSentinel(t *testing.T) {
//		s := redistest.NewSentinel(t)
//		rdb := s.Client()                // redis.NewFailoverClient
//		...
//		if err := s.Failover(ctx); err != nil { t.Fatal(err) }
//		...                              // rdb now talks to s.Primary
//	}
//
// Replication stays asynchronous: a write acknowledged just before a
// failover can be missing on the new primary. Use WAIT when a test needs
// it on the replica first.
//
// # In a TestMain
//
// To share one server (or cluster) between all tests of a package, start it
// in TestMain and close it when m.Run returns. TestMain may simply return:
// the testing package then exits with m.Run's result, after deferred calls
// have run. Tests sharing a server must use distinct keys or FLUSHALL.
//
//	var redisAddr string
//
//	func TestMain(m *testing.M) {
//		n, err := redistest.Start()
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer n.Close()
//		redisAddr = n.Addr
//		m.Run()
//	}
//
// Outside tests (a benchmark driver, a local playground), use Start,
// StartNodes, StartCluster and StartSentinel directly and call Close (Nodes,
// Sentinel) or Stop (Cluster) when done.
//
// # Lifetimes and leaks
//
// Stop and Kill end the process but keep its directory, so that Restart can
// reuse it; Close ends the process and removes the directory, and is final.
// If the test binary dies without running its cleanups (a panic, a timeout),
// the children still die with it: on Linux they are started with
// Pdeathsig=SIGKILL. Only their temporary directories may be left behind.
//
// # Options
//
// WithArgs appends redis-server arguments, e.g.
// WithArgs("--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru").
// Later arguments override the defaults, which include
// --enable-debug-command local (so tests may use DEBUG SLEEP and friends) and,
// for cluster nodes, --cluster-node-timeout 5000.
//
// All functions and methods are safe for concurrent use.
package redistest
