package inspect

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
)

// maxZset bounds the sorted sets read whole to pair deadlines with list
// entries (fair waiters, read-write and semaphore holds).
const maxZset = 1000

// Listing is the live instances of one object.
type Listing struct {
	Object    ObjectInfo  `json:"object"`
	Instances []*Instance `json:"instances"`
	// Truncated reports that the scan budget (Options.MaxScan) or the
	// instance limit (Options.MaxInstances) cut the listing short.
	Truncated bool `json:"truncated,omitempty"`
}

// Instance reads one instance of object, named by its param values.
// It returns ErrUnknownObject, ErrBadParams or a Redis error.
func (in *Inspector) Instance(ctx context.Context, object string, values ...string) (*Instance, error) {
	key, err := in.Key(object, values...)
	if err != nil {
		return nil, err
	}
	o := in.byNm[object]
	f := &found{obj: o, key: key, values: values, suffixes: map[string]bool{}}
	if sr, ok := o.k.(suffixReader); ok && sr.needsSuffixes(o.obj) {
		// The instance's state is in keys of their own: find them.
		res, err := in.scan(ctx, key+":", o)
		if err != nil {
			return nil, err
		}
		if g := res.byKey[key]; g != nil {
			f.suffixes = g.suffixes
		}
	}
	out, err := in.read(ctx, []*found{f})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// Instances lists the live instances of object, found by SCAN within the
// inspector's budget. An object without params has one instance, read
// without scanning and listed whether or not any of its keys exist (its
// state then is the idle one); Snapshot counts it only when they do.
func (in *Inspector) Instances(ctx context.Context, object string) (*Listing, error) {
	o, err := in.object(object)
	if err != nil {
		return nil, err
	}
	if len(o.params) == 0 {
		inst, err := in.Instance(ctx, object)
		if err != nil {
			return nil, err
		}
		return &Listing{Object: o.info(), Instances: []*Instance{inst}}, nil
	}
	prefix := in.spec.Namespace + ":{" + o.id + ":" + o.literals[0]
	res, err := in.scan(ctx, prefix, o)
	if err != nil {
		return nil, err
	}
	fs, cut := res.sorted(in.opts.MaxInstances)
	insts, err := in.read(ctx, fs)
	if err != nil {
		return nil, err
	}
	return &Listing{Object: o.info(), Instances: insts, Truncated: res.truncated || cut}, nil
}

// Snapshot is the live state of every object of the spec.
type Snapshot struct {
	Objects   []*ObjectState `json:"objects"`
	Truncated bool           `json:"truncated,omitempty"`
	// Scanned is how many keys of the namespace the scan returned.
	Scanned int `json:"scanned"`
}

// ObjectState is one object's instances and their totals.
type ObjectState struct {
	ObjectInfo
	// Instances found: those with at least one key in Redis (at most
	// Options.MaxInstances are read).
	Count     int  `json:"instances"`
	Truncated bool `json:"truncated,omitempty"`
	Totals
	Instances []*Instance `json:"items,omitempty"`
}

// Snapshot reads every object of the spec: one SCAN over the namespace
// (within the budget), then the state of the instances found.
func (in *Inspector) Snapshot(ctx context.Context) (*Snapshot, error) {
	res, err := in.scan(ctx, in.spec.Namespace+":{", nil)
	if err != nil {
		return nil, err
	}
	// An object without params counts as an instance here only when the
	// scan found one of its keys, as any other object's instances do
	// (Instances and Instance read it whether or not it has any).
	byObj := map[*object][]*found{}
	for _, f := range res.byKey {
		byObj[f.obj] = append(byObj[f.obj], f)
	}
	snap := &Snapshot{Truncated: res.truncated, Scanned: res.scanned}
	var all []*found
	for _, o := range in.objs {
		fs := byObj[o]
		if len(fs) == 0 && spec.KindOf(o.obj.Common().Section).Keyless {
			// One instance, read whether or not it has a key yet (a
			// schedule's state may live under its queue's hash tag).
			fs = []*found{{obj: o, key: keys.Build(in.spec.Namespace, o.id, o.literals)}}
		}
		sort.Slice(fs, func(i, j int) bool { return fs[i].key < fs[j].key })
		st := &ObjectState{ObjectInfo: o.info(), Count: len(fs), Truncated: res.truncated}
		if len(fs) > in.opts.MaxInstances {
			fs, st.Truncated = fs[:in.opts.MaxInstances], true
		}
		byObj[o] = fs
		all = append(all, fs...)
		snap.Objects = append(snap.Objects, st)
	}
	insts, err := in.read(ctx, all)
	if err != nil {
		return nil, err
	}
	i := 0
	for _, st := range snap.Objects {
		o := in.byNm[st.Name]
		n := len(byObj[o])
		st.Instances = insts[i : i+n]
		i += n
		for _, inst := range st.Instances {
			st.Totals.add(o.k, inst)
		}
	}
	return snap, nil
}

// add adds inst, an instance of the object of kind k, to t.
func (t *Totals) add(k kind, inst *Instance) { k.total(t, inst) }

// read reads the instances found, in order, each through its kind: one
// pipeline for all of them, a second for what needs the first's replies
// (the details of queue items), then the reads of their own (one script
// call per limiter reading).
func (in *Inspector) read(ctx context.Context, fs []*found) ([]*Instance, error) {
	out := make([]*Instance, len(fs))
	if len(fs) == 0 {
		return out, nil
	}
	pipe := in.rdb.Pipeline()
	now := pipe.Time(ctx)
	finish := make([]reader, len(fs))
	for i, f := range fs {
		inst := &Instance{Object: f.obj.name, Kind: f.obj.kind, Key: f.key, Params: make([]Param, len(f.values))}
		for j, v := range f.values {
			inst.Params[j] = Param{Name: f.obj.params[j].Name, Value: v}
		}
		out[i] = inst
		finish[i] = f.obj.k.read(ctx, in, pipe, f, inst)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("inspect: reading state: %w", err)
	}
	t, err := now.Result()
	if err != nil {
		return nil, fmt.Errorf("inspect: reading the server's time: %w", err)
	}
	nowMs := t.UnixMilli()
	// Second round: details that need what the first one found.
	pipe2 := in.rdb.Pipeline()
	var later []func()
	for _, fin := range finish {
		if next := fin(nowMs); next != nil {
			if f := next(pipe2); f != nil {
				later = append(later, f)
			}
		}
	}
	if len(later) > 0 {
		if _, err := pipe2.Exec(ctx); err != nil && err != redis.Nil {
			return nil, fmt.Errorf("inspect: reading state: %w", err)
		}
		for _, f := range later {
			f()
		}
	}
	// Reads of their own (a limiter runs its script).
	for i, f := range fs {
		if lr, ok := f.obj.k.(laterReader); ok {
			lr.readLater(ctx, in, f, out[i])
		}
	}
	return out, nil
}

// readWaiters adds the reads of an object's waiter registry to pipe and
// returns what lists its live waiters, longest-waiting first.
func (in *Inspector) readWaiters(ctx context.Context, pipe redis.Pipeliner, key string) func(nowMs int64) []Waiter {
	q := pipe.LRange(ctx, keys.Sub(key, "queue"), 0, int64(in.opts.MaxItems-1))
	dl := pipe.ZRangeWithScores(ctx, keys.Sub(key, "waiters"), 0, maxZset-1)
	return func(nowMs int64) []Waiter {
		deadlines := map[string]int64{}
		for _, z := range dl.Val() {
			deadlines[z.Member.(string)] = int64(z.Score)
		}
		var ws []Waiter
		for _, m := range q.Val() {
			d, ok := deadlines[m]
			if !ok || d <= nowMs {
				continue // dropped by the object's next script run
			}
			ws = append(ws, waiter(m, d-nowMs))
		}
		return ws
	}
}

// ttlMs turns a PTTL reply into milliseconds: -1 without expiry, -2
// without key.
func ttlMs(d time.Duration) int64 {
	if d < 0 {
		return int64(d / time.Nanosecond) // go-redis returns -1 and -2 as such
	}
	return d.Milliseconds()
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

func strAny(v any) string {
	s, _ := v.(string)
	return s
}

func atoiAny(v any) int {
	n, _ := strconv.Atoi(strAny(v))
	return n
}
