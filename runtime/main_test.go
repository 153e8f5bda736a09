package runtime_test

import (
	"context"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// One standalone node and one 3-primary cluster serve every test of the
// package; tests use keys of their own, so they can run in parallel.
var (
	single  *redistest.Node
	cluster *redistest.Cluster
)

func TestMain(m *testing.M) {
	if os.Getenv(pauseChildEnv) != "" { // a child of TestPausedHolderWritesNothing
		os.Exit(pauseChild())
	}
	if os.Getenv(leaderChildEnv) != "" { // a child of TestElectionFaults
		os.Exit(leaderChild())
	}
	if os.Getenv(waiterChildEnv) != "" { // a child of TestDeadWaiterPassedOver or TestStoppedWaiter
		os.Exit(waiterChild())
	}
	if os.Getenv(schedChildEnv) != "" { // a replica of TestScheduleReplicas
		os.Exit(scheduleChild())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if single, err = redistest.Start(); err != nil {
		log.Fatal(err)
	}
	defer single.Close()
	if cluster, err = redistest.StartCluster(3); err != nil {
		log.Fatal(err)
	}
	defer cluster.Stop()
	return m.Run()
}

// backend is a Redis deployment tests run against.
type backend struct {
	name string
	new  func() redis.UniversalClient
}

func backends() []backend {
	return []backend{
		{"single", func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: single.Addr}) }},
		{"cluster", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs})
		}},
	}
}

// eachBackend runs f as a parallel subtest per backend.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// newClient returns a runtime client over a new connection to b, closed
// when the test ends.
func newClient(t testing.TB, b backend) *lockrt.Client {
	return hookedClient(t, b)
}

// hookedClient is newClient over a go-redis client with hooks added.
func hookedClient(t testing.TB, b backend, hooks ...redis.Hook) *lockrt.Client {
	rdb := b.new()
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	c := lockrt.New(rdb)
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
	})
	return c
}

// script returns the runtime's script of that name.
func script(t testing.TB, name string) *lockrt.Script {
	s := lockimpl.Scripts().Script(name)
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	return s
}

// lockScripts returns the runtime's scripts of a lock kind ("redlock":
// a RedLock's).
func lockScripts(t testing.TB, kind string) *lockrt.LockScripts {
	if kind == "redlock" {
		return lockimpl.Scripts().RedLocks()
	}
	for _, k := range []lockrt.LockKind{lockrt.Reentrant, lockrt.Simple, lockrt.Fair, lockrt.ReadWrite, lockrt.Fenced} {
		if k.String() == kind {
			return lockimpl.Scripts().Locks(k)
		}
	}
	t.Fatalf("no scripts for lock kind %q", kind)
	return nil
}

// def returns a lock definition of the given kind.
func def(t testing.TB, kind lockrt.LockKind, lease time.Duration, renew bool, wait time.Duration) *lockrt.LockDef {
	return &lockrt.LockDef{Name: t.Name(), Kind: kind, Lease: lease, Renew: renew, Wait: wait, Scripts: lockScripts(t, kind.String())}
}

// runNames is runName's memory: how many runs of each test name this
// process began, and the name each test (by its testing.TB) was given.
var runNames = struct {
	sync.Mutex
	runs map[string]int
	of   map[testing.TB]string
}{runs: map[string]int{}, of: map[testing.TB]string{}}

// runName is t's name with "/" and " " made "_", and ".<n>" appended for
// the nth run of that name in this process (go test -count=n, whose runs
// share the package's servers): the name of the keys and connections of
// t's own, the same for every call with t.
func runName(t testing.TB) string {
	runNames.Lock()
	defer runNames.Unlock()
	if name, ok := runNames.of[t]; ok {
		return name
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	runNames.runs[name]++
	if n := runNames.runs[name]; n > 1 {
		name += "." + strconv.Itoa(n)
	}
	runNames.of[t] = name
	return name
}

// key returns a key of the test's own (of this run of it: runName).
func key(t testing.TB, values ...string) string {
	object := runName(t)
	lits := make([]string, len(values)+1)
	for i := 1; i < len(lits); i++ {
		lits[i-1] = "k:"
	}
	k := lockrt.KeyDef{Namespace: "test", Object: object, Literals: lits}
	return k.Key(values...)
}

// inBackground runs take (a Lock, say) in a goroutine and returns the
// channel its result comes on: the zero value after take's error was
// reported.
func inBackground[T any](t testing.TB, take func() (T, error)) <-chan T {
	got := make(chan T, 1)
	go func() {
		v, err := take()
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	return got
}

// lockThenUnlock locks with lock (a Lock's, a RedLock's or a MultiLock's
// Lock method) and unlocks at once, in a goroutine (a waiter that takes
// its turn): the channel gets the first error, or nil.
func lockThenUnlock[L interface{ Unlock(context.Context) error }](ctx context.Context, lock func(context.Context, ...lockrt.AcquireOption) (L, error)) <-chan error {
	done := make(chan error, 1)
	go func() {
		le, err := lock(ctx)
		if err == nil {
			err = le.Unlock(ctx)
		}
		done <- err
	}()
	return done
}

// errOnly returns a call's error, dropping its value (an offer's ids).
func errOnly[T any](_ T, err error) error { return err }
