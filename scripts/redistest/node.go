package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrNotFound is returned by Start, StartNodes and StartCluster when no
	// redis-server binary is in PATH.
	ErrNotFound = errors.New("redis-server not found in PATH; run `make redis` or apt-get install redis-server")

	// ErrClosed is returned by Restart after Close.
	ErrClosed = errors.New("redistest: node is closed")

	// errAddrInUse marks a launch that failed because the port (or, for a
	// cluster node, the bus port) was taken: Start retries on another port.
	errAddrInUse = errors.New("address already in use")
)

// Timeouts. Variables, so this package's tests can shorten them.
var (
	readyTimeout = 10 * time.Second       // from exec to answering PING
	stopTimeout  = 10 * time.Second       // from SIGTERM to exit, before SIGKILL
	restartWait  = 2 * time.Second        // Restart retries a taken port this long
	pollInterval = 10 * time.Millisecond  // between readiness probes
	probeTimeout = 500 * time.Millisecond // one readiness probe
)

// startAttempts is how many ports Start tries when redis-server cannot bind:
// another process may take a free port between our probe and its bind.
const startAttempts = 5

// Option configures a node started by Start, StartNodes or StartCluster.
type Option func(*config)

type config struct {
	args     []string
	cluster  bool
	replicas int // per primary, StartCluster only
}

// WithArgs appends command-line arguments to redis-server's, after the
// defaults, which they override: WithArgs("--maxmemory", "10mb").
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithReplicas gives every primary of a cluster started by StartCluster n
// replicas (Cluster.Replicas). Start and StartNodes ignore it.
func WithReplicas(n int) Option {
	return func(c *config) { c.replicas = n }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Node is one redis-server process on 127.0.0.1. Its Addr, Port and Dir do
// not change for its lifetime, across Stop, Kill and Restart.
type Node struct {
	Addr string // "127.0.0.1:port", for redis.Options.Addr
	Port int
	Dir  string // working directory: redis.log, redis.out, nodes.conf

	bin  string
	args []string // everything after --port

	mu      sync.Mutex
	proc    *process // nil when not running
	clients []*redis.Client
	closed  bool
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	out  *os.File      // stdout and stderr
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // cmd.Wait's result, set before done is closed
}

// Start starts a standalone node on a free port and returns once it answers
// PING. It returns ErrNotFound when redis-server is not in PATH, and otherwise
// an error that includes the tail of the node's log.
func Start(opts ...Option) (*Node, error) {
	return start(newConfig(opts))
}

// StartNodes starts n independent standalone nodes concurrently, e.g. for
// RedLock. If one fails, the others are closed and the errors returned.
func StartNodes(n int, opts ...Option) ([]*Node, error) {
	return startMany(n, newConfig(opts))
}

func startMany(n int, cfg config) ([]*Node, error) {
	if n < 1 {
		return nil, fmt.Errorf("redistest: need at least one node, got %d", n)
	}
	nodes := make([]*Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { nodes[i], errs[i] = start(cfg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(nodes)
		if errors.Is(err, ErrNotFound) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	return nodes, nil
}

// closeAll closes the non-nil nodes concurrently.
func closeAll(nodes []*Node) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n != nil {
			wg.Go(func() { errs[i] = n.Close() })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

func start(cfg config) (*Node, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotFound
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	n := &Node{Dir: dir, bin: bin}
	n.args = []string{
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--enable-debug-command", "local",
	}
	if cfg.cluster {
		n.args = append(n.args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
		)
	}
	n.args = append(n.args, cfg.args...)
	return n.launchOnFreePort(cfg.cluster)
}

// launchOnFreePort starts n on a free port, trying another when the one
// picked was taken meanwhile. On failure it removes n's directory.
func (n *Node) launchOnFreePort(cluster bool) (*Node, error) {
	quietLogs()
	var err error
	for range startAttempts {
		if n.Port, err = freePort(cluster); err != nil {
			break
		}
		n.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port))
		if err = n.launch(); !errors.Is(err, errAddrInUse) {
			break
		}
	}
	if err != nil {
		os.RemoveAll(n.Dir)
		return nil, err
	}
	return n, nil
}

// freePort returns a port that was free a moment ago; for a cluster node,
// port+10000 (its cluster bus) was free too. It picks at random below the
// kernel's ephemeral ports (ephemeralLow), where no outgoing connection
// takes a port: a node restarted after a fault keeps its port, and while
// it is down its clients' reconnects would otherwise hold that port now
// and then (a connect to a port nobody listens on, from the ephemeral
// range, can even connect to itself), and another test asking the
// kernel for a free port could be given it.
func freePort(cluster bool) (int, error) {
	lo, hi := minPort, ephemeralLow()
	if cluster {
		hi -= 10000 // the bus, port+10000, below the ephemeral ports too
	}
	if hi-lo < 1000 {
		return 0, fmt.Errorf("redistest: finding a free port: no room between %d and the ephemeral ports (%d)", lo, ephemeralLow())
	}
	var err error
	for range 50 {
		port := lo + rand.IntN(hi-lo)
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err != nil {
			continue
		}
		if !cluster {
			l.Close()
			return port, nil
		}
		bus, err2 := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		l.Close()
		if err2 != nil {
			err = err2
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, fmt.Errorf("redistest: finding a free port: %w", err)
}

// minPort is the lowest port freePort picks.
const minPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range
// (Linux: /proc/sys/net/ipv4/ip_local_port_range), or 32768, Linux's
// default, where it cannot be read (other systems' start higher).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= minPort {
		return 32768
	}
	return lo
}

// launch starts redis-server on n.Port and waits until it answers PING.
// The caller holds n.mu or owns n exclusively.
func (n *Node) launch() error {
	// Truncate the logs, so the tail in an error is about this run.
	logPath := filepath.Join(n.Dir, "redis.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	out, err := os.Create(filepath.Join(n.Dir, "redis.out"))
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	cmd := exec.Command(n.bin, append([]string{"--port", strconv.Itoa(n.Port)}, n.args...)...)
	cmd.Dir = n.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("redistest: starting %s: %w", n.bin, err)
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()

	if err := n.waitReady(p); err != nil {
		p.kill()
		return err
	}
	n.proc = p
	return nil
}

// waitReady polls until p answers on n.Addr, or p exits, or readyTimeout.
func (n *Node) waitReady(p *process) error {
	deadline := time.Now().Add(readyTimeout)
	pid := p.cmd.Process.Pid
	for {
		select {
		case <-p.done:
			tail := n.logTail()
			err := fmt.Errorf("redistest: redis-server on port %d exited during startup (%v); log:\n%s", n.Port, p.err, tail)
			if strings.Contains(tail, "already in use") {
				return fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return err
		default:
		}
		// Compare the pid: another node may have won the race for the port.
		if got, err := probe(n.Addr); err == nil && got == pid {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on port %d did not answer PING within %v; log:\n%s", n.Port, readyTimeout, n.logTail())
		}
		time.Sleep(pollInterval)
	}
}

// probe asks the server at addr for INFO server and returns its process_id.
// It uses a raw connection, to depend on nothing but the server.
func probe(addr string) (pid int, err error) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := io.WriteString(conn, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(head, "$") { // e.g. -LOADING
		return 0, fmt.Errorf("unexpected reply %q", strings.TrimSpace(head))
	}
	size, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return 0, err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no process_id in INFO server")
}

// logTail returns the last lines of redis.log and redis.out.
func (n *Node) logTail() string {
	const lines = 20
	var b strings.Builder
	for _, name := range []string{"redis.log", "redis.out"} {
		data, err := os.ReadFile(filepath.Join(n.Dir, name))
		if err != nil || len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		fmt.Fprintf(&b, "--- %s ---\n%s\n", filepath.Join(n.Dir, name), strings.Join(all, "\n"))
	}
	if b.Len() == 0 {
		return "(empty)"
	}
	return b.String()
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *process) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop stops the node gracefully: SHUTDOWN NOSAVE, or SIGTERM if that fails,
// then it waits until the process has exited and its port is closed. If it
// has not exited after 10s, Stop kills it and returns an error saying so.
// Stop keeps the node's directory, for Restart. Stopping a stopped node
// returns nil.
func (n *Node) Stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stop()
}

func (n *Node) stop() error {
	p := n.proc
	if p == nil {
		return nil
	}
	n.proc = nil
	select {
	case <-p.done: // exited by itself; the port may be someone else's now
		return nil
	default:
	}
	// SHUTDOWN exits at once; SIGTERM waits for the next serverCron tick
	// (100ms), and is only the fallback, e.g. when SHUTDOWN was renamed.
	shutdown(n.Addr)
	select {
	case <-p.done:
		return nil
	case <-time.After(probeTimeout):
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		p.kill()
		return fmt.Errorf("redistest: redis-server on port %d ignored SHUTDOWN and SIGTERM for %v; killed it", n.Port, stopTimeout)
	}
}

// shutdown sends SHUTDOWN NOSAVE to addr and waits until the server closes
// the connection, or probeTimeout. Errors are ignored: Stop falls back on
// SIGTERM.
func shutdown(addr string) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := io.WriteString(conn, "*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n"); err != nil {
		return
	}
	io.Copy(io.Discard, conn)
}

// Kill kills the node with SIGKILL, as in a crash, and waits until the
// process is gone. Killing a stopped node returns nil.
func (n *Node) Kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		n.proc.kill()
		n.proc = nil
	}
	return nil
}

// Restart starts the node again on the same port and in the same directory,
// after Stop or Kill; a running node is stopped first. Data is gone (no
// persistence); a cluster node keeps its node ID and slots (nodes.conf).
// If the port is taken, Restart retries for 2s. It returns ErrClosed after
// Close, and otherwise an error that includes the tail of the node's log.
func (n *Node) Restart() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	if err := n.stop(); err != nil {
		return err
	}
	deadline := time.Now().Add(restartWait)
	for {
		err := n.launch()
		if !errors.Is(err, errAddrInUse) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the node's process is running: started, and
// neither stopped nor killed nor exited by itself (e.g. SHUTDOWN).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return false
	}
	select {
	case <-n.proc.done:
		return false
	default:
		return true
	}
}

// Client returns a new go-redis client to the node, with default options.
// It survives Stop/Restart (go-redis reconnects). Close closes it; the caller
// may close it earlier.
func (n *Node) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.Addr})
	n.mu.Lock()
	n.clients = append(n.clients, c)
	n.mu.Unlock()
	return c
}

// Close closes the node's clients, stops it (as Stop) and removes its
// directory. It is final: Restart then returns ErrClosed. Closing a closed
// node returns nil.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	for _, c := range n.clients {
		c.Close() // may already be closed by its user
	}
	n.clients = nil
	err := n.stop()
	return errors.Join(err, os.RemoveAll(n.Dir))
}
