package runtime_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// The election fault test runs campaigners as child processes (the test
// binary again) that log what they believe. These variables configure a
// child.
const (
	leaderChildEnv = "LOCKGEN_LEADER_CHILD" // the child's id; its log is <dir>/<id>.log
	leaderDirEnv   = "LOCKGEN_LEADER_DIR"
	leaderAddrEnv  = "LOCKGEN_LEADER_ADDR"
	leaderKeyEnv   = "LOCKGEN_LEADER_KEY"
	leaderLease    = time.Second // renewed every 333ms
)

func leaderDef() *lockrt.LockDef {
	d := processDef(lockrt.Fenced)
	d.Name, d.Lease = "Leader", leaderLease
	return d
}

// leaderChild is a child's main: campaign, log "lead <epoch> <ns>" when
// Campaign returns and "live <epoch> <before> <after>" every 2ms while
// the term's context is live (before and after: the wall clock, in ns,
// around the check of its Err: the term was live at an instant between),
// then campaign again; until killed.
func leaderChild() int {
	id := os.Getenv(leaderChildEnv)
	f, err := os.OpenFile(os.Getenv(leaderDirEnv)+"/"+id+".log", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: strings.Split(os.Getenv(leaderAddrEnv), ","),
		ClientName: "leader-" + id, IsClusterMode: strings.Contains(os.Getenv(leaderAddrEnv), ",")})
	c := lockrt.New(rdb, lockrt.WithID(id))
	e := lockrt.NewElection(c.Lock(leaderDef(), os.Getenv(leaderKeyEnv)))
	for {
		term, err := e.Campaign(context.Background())
		if err != nil {
			time.Sleep(10 * time.Millisecond) // Redis unreachable: campaign again
			continue
		}
		fmt.Fprintf(f, "lead %d %d\n", term.Epoch(), time.Now().UnixNano())
		for {
			before := time.Now().UnixNano()
			live := term.Context().Err() == nil
			after := time.Now().UnixNano()
			if !live {
				break
			}
			fmt.Fprintf(f, "live %d %d %d\n", term.Epoch(), before, after)
			time.Sleep(2 * time.Millisecond) // the leader's work: a write every 2ms, not a barrier
		}
		_ = term.Resign(context.Background())
	}
}

// TestElectionFaults: four campaigner processes on one node, and on a
// 3-primary cluster; the leader is
// killed (kill -9, then restarted), stopped past its lease (SIGSTOP, then
// SIGCONT) and cut off (CLIENT KILL of its connections). From the
// processes' own logs: no term was live after a later term was (two
// leaders' contexts never live at once), epochs grow in the order terms
// began, and a new leader came within the lease and a second of a kill or
// a stop (held to that bound with -tags costs; always to 10s).
func TestElectionFaults(t *testing.T) {
	t.Parallel()
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		electionFaults(t, backends()[0], []string{single.Addr})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		electionFaults(t, backends()[1], cluster.Addrs)
	})
}

func electionFaults(t *testing.T, b backend, addrs []string) {
	dir, k := t.TempDir(), key(t)
	children := map[string]*exec.Cmd{}
	start := func(id string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), leaderChildEnv+"="+id, leaderDirEnv+"="+dir, leaderAddrEnv+"="+strings.Join(addrs, ","), leaderKeyEnv+"="+k)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[id] = cmd
	}
	t.Cleanup(func() {
		for _, cmd := range children {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	for i := range 4 {
		start(fmt.Sprintf("c%d", i))
	}
	obs := newClient(t, b)
	e := lockrt.NewElection(obs.Lock(leaderDef(), k))
	// leader waits until someone other than not leads, and returns it.
	leader := func(not string) lockrt.Leader {
		t.Helper()
		var ld lockrt.Leader
		eventually(t, failAfter, func() bool {
			var err error
			ld, err = e.Leader(context.Background())
			return err == nil && ld.Leads() && ld.Owner != not
		}, "no new leader")
		return ld
	}
	type fault struct {
		name string
		at   time.Time
		took time.Duration
	}
	var faults []fault
	// confirmed waits until someone other than not leads and has logged
	// its term's first live line, and returns it: a fault then lands on a
	// term the logs show. (A leader read from Redis may be a hand-off its
	// process never confirms: then the lock moves on, and so does this.)
	confirmed := func(not string) lockrt.Leader {
		t.Helper()
		for {
			ld := leader(not)
			want := fmt.Sprintf("live %d ", ld.Epoch)
			seen := false
			eventually(t, failAfter, func() bool {
				b, _ := os.ReadFile(dir + "/" + ld.ID + ".log")
				if seen = strings.Contains(string(b), want); seen {
					return true
				}
				now, err := e.Leader(context.Background())
				return err == nil && now.Owner != ld.Owner
			}, ld.ID+" did not log its term")
			if seen {
				return ld
			}
		}
	}
	cur := confirmed("")
	for round, name := range []string{"kill", "stop", "clientkill", "kill", "stop"} {
		cmd := children[cur.ID]
		at := time.Now()
		switch name {
		case "kill":
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			delete(children, cur.ID)
		case "stop":
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		case "clientkill":
			for _, addr := range addrs {
				node := redis.NewClient(&redis.Options{Addr: addr})
				killClients(t, node, "leader-"+cur.ID)
				node.Close()
			}
		}
		if name == "clientkill" {
			// The leader's renewals go on over new connections: it may
			// keep the lead. Wait for one of its renewals past the kill
			// (the lease's TTL going up again) or another term.
			prev := time.Duration(-1)
			eventually(t, failAfter, func() bool {
				ld, err := e.Leader(context.Background())
				if err != nil {
					return false
				}
				if ld.Owner != cur.Owner {
					return true
				}
				renewed := prev >= 0 && ld.TTL > prev
				prev = ld.TTL
				return renewed
			}, "neither a renewal nor a new term after the CLIENT KILL")
		} else {
			next := leader(cur.Owner)
			faults = append(faults, fault{name, at, time.Since(at)})
			t.Logf("round %d %s: %s (epoch %d) after %s led (epoch %d): %s", round, name, next.ID, next.Epoch, cur.ID, cur.Epoch, time.Since(at))
		}
		switch name {
		case "kill":
			start(cur.ID + "r")
		case "stop":
			time.Sleep(leaderLease) // stopped well past its lease
			_ = cmd.Process.Signal(syscall.SIGCONT)
		}
		cur = confirmed("")
	}

	// Read every child's log.
	var leads []struct {
		epoch, at int64
		child     string
	}
	lastBefore := map[int64]int64{} // per epoch: the latest instant it was surely live after
	firstAfter := map[int64]int64{} // per epoch: the earliest instant by which it was surely live
	owner := map[int64]string{}
	files, _ := os.ReadDir(dir)
	for _, fi := range files {
		child := strings.TrimSuffix(fi.Name(), ".log")
		b, err := os.ReadFile(dir + "/" + fi.Name())
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			n := make([]int64, len(f))
			for i := 1; i < len(f); i++ {
				n[i], _ = strconv.ParseInt(f[i], 10, 64)
			}
			switch {
			case f[0] == "lead" && len(f) == 3:
				leads = append(leads, struct {
					epoch, at int64
					child     string
				}{n[1], n[2], child})
				if o, dup := owner[n[1]]; dup {
					t.Errorf("epoch %d led by %s and %s", n[1], o, child)
				}
				owner[n[1]] = child
			case f[0] == "live" && len(f) == 4:
				ep := n[1]
				if n[2] > lastBefore[ep] {
					lastBefore[ep] = n[2]
				}
				if fa, ok := firstAfter[ep]; !ok || n[3] < fa {
					firstAfter[ep] = n[3]
				}
			}
		}
	}
	// Epochs grow in the order the terms began.
	sort.Slice(leads, func(i, j int) bool { return leads[i].at < leads[j].at })
	for i := 1; i < len(leads); i++ {
		if leads[i].epoch <= leads[i-1].epoch {
			t.Errorf("term %d (%s) began after term %d (%s)", leads[i].epoch, leads[i].child, leads[i-1].epoch, leads[i-1].child)
		}
	}
	// No term was live after a later one was: two leaders never at once.
	var epochs []int64
	for ep := range firstAfter {
		epochs = append(epochs, ep)
	}
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] < epochs[j] })
	for i, older := range epochs {
		for _, newer := range epochs[i+1:] {
			if lastBefore[older] > firstAfter[newer] {
				t.Errorf("term %d (%s) was live %s after term %d (%s) was", older, owner[older],
					time.Duration(lastBefore[older]-firstAfter[newer]), newer, owner[newer])
			}
		}
	}
	if len(epochs) < len(faults)+1 {
		t.Errorf("%d terms were live, for %d faults", len(epochs), len(faults))
	}
	bound := 10 * time.Second
	if costsChecked {
		bound = leaderLease + time.Second
	}
	for _, f := range faults {
		if f.took > bound {
			t.Errorf("a new leader came %s after the %s, want at most %s", f.took, f.name, bound)
		}
	}
}

// killClients kills the connections of rdb's server named name.
func killClients(t testing.TB, rdb *redis.Client, name string) {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		var id string
		match := false
		for _, kv := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(kv, "id="); ok {
				id = v
			}
			if kv == "name="+name {
				match = true
			}
		}
		if match && id != "" {
			_ = rdb.Do(context.Background(), "client", "kill", "id", id).Err()
		}
	}
}
