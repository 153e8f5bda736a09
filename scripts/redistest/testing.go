package redistest

import "testing"

// Single starts a standalone node for t (see Start) and closes it when the
// test ends. It fails t with t.Fatal when the node cannot be started, e.g.
// when redis-server is not installed.
func Single(t testing.TB, opts ...Option) *Node {
	t.Helper()
	n, err := Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeForTest(t, n) })
	return n
}

// NewCluster starts a cluster of primaries for t (see StartCluster) and
// stops it when the test ends. It fails t with t.Fatal when the cluster
// cannot be started.
func NewCluster(t testing.TB, primaries int, opts ...Option) *Cluster {
	t.Helper()
	c, err := StartCluster(primaries, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.all() {
				t.Logf("redistest: %s:\n%s", n.Addr, n.logTail())
			}
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Independent starts n independent standalone nodes for t (see StartNodes)
// and closes them when the test ends. It fails t with t.Fatal when they
// cannot be started.
func Independent(t testing.TB, n int, opts ...Option) []*Node {
	t.Helper()
	nodes, err := StartNodes(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		t.Cleanup(func() { closeForTest(t, node) })
	}
	return nodes
}

// closeForTest closes n, logging its log's tail first if t has failed.
func closeForTest(t testing.TB, n *Node) {
	if t.Failed() {
		t.Logf("redistest: %s:\n%s", n.Addr, n.logTail())
	}
	if err := n.Close(); err != nil {
		t.Error(err)
	}
}
