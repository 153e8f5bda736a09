package inspect

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/internal/values"
	"github.com/lockgen/lockgen/runtime/lockimpl"
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
	if o.lim != nil && o.lim.Scope == spec.ScopePerClient {
		// The clients' states are keys of their own: find them.
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

// Totals add up an object's instances.
type Totals struct {
	Held     int   `json:"held,omitempty"`     // locks held; semaphore permits in use
	Holders  int   `json:"holders,omitempty"`  // holds (a read-write lock's readers count one each)
	Waiters  int   `json:"waiters,omitempty"`  // known waiters
	Capacity int   `json:"capacity,omitempty"` // semaphores: permits in all
	Ready    int64 `json:"ready,omitempty"`
	Delayed  int64 `json:"delayed,omitempty"`
	InFlight int64 `json:"inFlight,omitempty"`
	Dead     int64 `json:"dead,omitempty"`
	Open     int   `json:"open,omitempty"`      // latches open
	Empty    int   `json:"exhausted,omitempty"` // limiter allowances with nothing left
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
		n := len(byObj[in.byNm[st.Name]])
		st.Instances = insts[i : i+n]
		i += n
		for _, inst := range st.Instances {
			st.Totals.add(inst)
		}
	}
	return snap, nil
}

func (t *Totals) add(inst *Instance) {
	switch {
	case inst.Lock != nil:
		if inst.Lock.Held {
			t.Held++
		}
		t.Holders += len(inst.Lock.Holders)
		t.Waiters += len(inst.Lock.Waiters)
	case inst.Semaphore != nil:
		t.Waiters += len(inst.Semaphore.Waiters)
		t.Held += inst.Semaphore.Held
		t.Holders += len(inst.Semaphore.Holders)
		t.Capacity += inst.Semaphore.Capacity
	case inst.Latch != nil:
		if inst.Latch.Open {
			t.Open++
		}
	case inst.Limiter != nil:
		for _, r := range inst.Limiter.Clients {
			if r.Remaining == 0 && r.Error == "" {
				t.Empty++
			}
		}
	case inst.Queue != nil:
		t.Ready += inst.Queue.Ready
		t.Delayed += inst.Queue.Delayed
		t.InFlight += inst.Queue.InFlight
		t.Dead += inst.Queue.Dead
	}
}

// read reads the instances found, in order: one pipeline for all of
// them, a second for the details of queue items, and one script call per
// limiter reading.
func (in *Inspector) read(ctx context.Context, fs []*found) ([]*Instance, error) {
	out := make([]*Instance, len(fs))
	if len(fs) == 0 {
		return out, nil
	}
	pipe := in.rdb.Pipeline()
	now := pipe.Time(ctx)
	finish := make([]func(nowMs int64) func(redis.Pipeliner) func(), len(fs))
	for i, f := range fs {
		inst := &Instance{Object: f.obj.name, Kind: f.obj.kind, Key: f.key, Params: make([]Param, len(f.values))}
		for j, v := range f.values {
			inst.Params[j] = Param{Name: f.obj.params[j].Name, Value: v}
		}
		out[i] = inst
		finish[i] = in.queueReads(ctx, pipe, f, inst)
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
	// Limiters run their own script.
	for i, f := range fs {
		if f.obj.lim != nil {
			in.readLimiter(ctx, f, out[i])
		}
	}
	return out, nil
}

// queueReads adds the reads of one instance to pipe and returns what turns
// their replies into inst's state; that may return a second round.
func (in *Inspector) queueReads(ctx context.Context, pipe redis.Pipeliner, f *found, inst *Instance) func(int64) func(redis.Pipeliner) func() {
	o, key := f.obj, f.key
	simple := func(fn func(nowMs int64)) func(int64) func(redis.Pipeliner) func() {
		return func(nowMs int64) func(redis.Pipeliner) func() { fn(nowMs); return nil }
	}
	max := in.opts.MaxItems
	switch {
	case o.lock != nil:
		st := &LockState{}
		inst.Lock = st
		switch o.lock.Kind {
		case spec.Fair:
			h := pipe.HGetAll(ctx, key)
			ttl := pipe.PTTL(ctx, key)
			waiters := in.readWaiters(ctx, pipe, key)
			return simple(func(nowMs int64) {
				for owner, n := range h.Val() {
					hd := holder(owner)
					c, _, _ := strings.Cut(n, " ") // "<holds>[ <op>,...]"
					hd.Holds, _ = strconv.Atoi(c)
					hd.TTLMs = ttlMs(ttl.Val())
					st.Holders = append(st.Holders, hd)
				}
				st.Waiters = waiters(nowMs)
				st.Held = len(st.Holders) > 0
			})
		case spec.ReadWrite:
			h := pipe.HGetAll(ctx, key)
			dl := pipe.ZRangeWithScores(ctx, keys.Sub(key, "holds"), 0, maxZset-1)
			waiters := in.readWaiters(ctx, pipe, key)
			return simple(func(nowMs int64) {
				st.Waiters = waiters(nowMs)
				deadlines := map[string]int64{}
				for _, z := range dl.Val() {
					deadlines[z.Member.(string)] = int64(z.Score)
				}
				fields := h.Val()
				if w, ok := fields["writer"]; ok {
					if d, ok := deadlines["w"]; ok && d > nowMs {
						hd := holder(w)
						hd.Side = "write"
						hd.Holds, _ = strconv.Atoi(fields["writes"])
						hd.TTLMs = d - nowMs
						st.Holders = append(st.Holders, hd)
					}
				}
				var readers []Holder
				for field, n := range fields {
					owner, ok := strings.CutPrefix(field, "r:")
					if !ok {
						continue
					}
					if d, ok := deadlines[field]; ok && d > nowMs {
						hd := holder(owner)
						hd.Side = "read"
						hd.Holds, _ = strconv.Atoi(n)
						hd.TTLMs = d - nowMs
						readers = append(readers, hd)
					}
				}
				sort.Slice(readers, func(i, j int) bool { return readers[i].Owner < readers[j].Owner })
				st.Holders = append(st.Holders, readers...)
				st.Held = len(st.Holders) > 0
			})
		default: // reentrant, fenced, simple, redlock
			v := pipe.Get(ctx, key)
			ttl := pipe.PTTL(ctx, key)
			var fence *redis.StringCmd
			if o.lock.Kind == spec.Fenced {
				fence = pipe.Get(ctx, keys.Sub(key, "fence"))
			}
			kind := o.lock.Kind
			waiters := in.readWaiters(ctx, pipe, key)
			return simple(func(nowMs int64) {
				st.Waiters = waiters(nowMs)
				if fence != nil {
					st.LastToken, _ = fence.Int64()
				}
				val, err := v.Result()
				if err != nil {
					return
				}
				h, ok := values.ParseHold(val)
				if !ok {
					return
				}
				hd := holder(h.Owner)
				hd.Holds = 1
				if kind != spec.Simple && kind != spec.RedLock {
					hd.Holds, hd.Token = h.Holds, h.Token
				}
				hd.TTLMs = ttlMs(ttl.Val())
				st.Holders, st.Held = []Holder{hd}, true
			})
		}
	case o.sem != nil:
		st := &SemaphoreState{}
		inst.Semaphore = st
		holds := pipe.ZRangeWithScores(ctx, key, 0, maxZset-1)
		counts := pipe.HGetAll(ctx, keys.Sub(key, "counts"))
		capacity := pipe.Get(ctx, keys.Sub(key, "capacity"))
		permits := o.sem.Permits
		waiters := in.readWaiters(ctx, pipe, key)
		return simple(func(nowMs int64) {
			st.Waiters = waiters(nowMs)
			st.Capacity = permits
			// "<capacity>[ <op>,...]" (see semaphore_capacity)
			c, _, _ := strings.Cut(capacity.Val(), " ")
			if c, err := strconv.Atoi(c); err == nil && capacity.Err() == nil {
				st.Capacity, st.CapacitySet = c, true
			}
			cs := counts.Val()
			for _, z := range holds.Val() {
				if int64(z.Score) <= nowMs {
					continue // ran out; evicted by the next script run
				}
				owner := z.Member.(string)
				n, _ := strconv.Atoi(cs[owner])
				st.Held += n
				if len(st.Holders) < max {
					hd := holder(owner)
					hd.Permits, hd.TTLMs = n, int64(z.Score)-nowMs
					st.Holders = append(st.Holders, hd)
				}
			}
			st.Free = max0(st.Capacity - st.Held)
		})
	case o.latch != nil:
		st := &LatchState{Count: o.latch.Count, TTLMs: -2}
		inst.Latch = st
		v := pipe.Get(ctx, key)
		ttl := pipe.PTTL(ctx, key)
		return simple(func(int64) {
			if n, err := values.LatchCount(v.Val()); err == nil && v.Err() == nil {
				st.Set, st.Count, st.TTLMs = true, n, ttlMs(ttl.Val())
			}
			st.Open = st.Count <= 0
		})
	case o.lim != nil:
		// Read by readLimiter after the pipeline.
		return simple(func(int64) {})
	case o.queue != nil:
		st := &QueueState{}
		inst.Queue = st
		return in.readQueue(ctx, pipe, key, o.queue.Reliable != nil, st)
	}
	return simple(func(int64) {})
}

// readQueue adds the reads of a queue instance to pipe: its depths and
// the first items of each kind (ids from the lists and sets, then their
// bodies, delivery counts and reasons in a second round).
func (in *Inspector) readQueue(ctx context.Context, pipe redis.Pipeliner, key string, reliable bool, st *QueueState) func(int64) func(redis.Pipeliner) func() {
	sub := func(s string) string { return keys.Sub(key, s) }
	max := int64(in.opts.MaxItems)
	ready := pipe.LLen(ctx, key)
	readyItems := pipe.LRange(ctx, key, 0, max-1)
	delayed := pipe.ZCard(ctx, sub("delayed"))
	delayedItems := pipe.ZRangeWithScores(ctx, sub("delayed"), 0, max-1)
	inflight := pipe.ZCard(ctx, sub("inflight"))
	deliveries := pipe.ZRangeWithScores(ctx, sub("inflight"), 0, max-1)
	dead := pipe.LLen(ctx, sub("dead"))
	deadIDs := pipe.LRange(ctx, sub("dead"), 0, max-1)
	return func(nowMs int64) func(redis.Pipeliner) func() {
		st.Ready, st.Delayed, st.InFlight, st.Dead = ready.Val(), delayed.Val(), inflight.Val(), dead.Val()
		// ids lists every item whose body and counters are read next:
		// ready (a reliable queue's ids), delayed, in flight, dead.
		var ids []string
		if reliable {
			ids = append(ids, readyItems.Val()...)
		} else {
			for _, body := range readyItems.Val() {
				st.ReadyItems = append(st.ReadyItems, queueItem("", ItemReady, body, 0))
			}
		}
		nReady := len(ids)
		for i, z := range delayedItems.Val() {
			due := int64(max0(int(int64(z.Score) - nowMs)))
			if i == 0 {
				next := due
				st.NextDueMs = &next
			}
			ids = append(ids, z.Member.(string))
			st.DelayedItems = append(st.DelayedItems, QueueItem{ID: z.Member.(string), State: ItemDelayed, DueMs: &due})
		}
		for _, z := range deliveries.Val() {
			id := z.Member.(string)
			ids = append(ids, id)
			st.Deliveries = append(st.Deliveries, Delivery{ID: id, DeadlineMs: int64(z.Score) - nowMs})
		}
		dids := deadIDs.Val()
		ids = append(ids, dids...)
		if len(ids) == 0 {
			return nil
		}
		return func(p redis.Pipeliner) func() {
			body := p.HMGet(ctx, sub("data"), ids...)
			att := p.HMGet(ctx, sub("att"), ids...)
			var reason *redis.SliceCmd
			if len(dids) > 0 {
				reason = p.HMGet(ctx, sub("err"), dids...)
			}
			return func() {
				bodies, atts := body.Val(), att.Val()
				if len(bodies) != len(ids) || len(atts) != len(ids) {
					return // the round failed: the depths stand alone
				}
				i := 0
				for ; i < nReady; i++ {
					st.ReadyItems = append(st.ReadyItems, queueItem(ids[i], ItemReady, strAny(bodies[i]), atoiAny(atts[i])))
				}
				for j := range st.DelayedItems {
					it := &st.DelayedItems[j]
					it.Deliveries = atoiAny(atts[i])
					it.Body, it.Codec, it.Carried = splitBody(strAny(bodies[i]))
					i++
				}
				for j := range st.Deliveries {
					st.Deliveries[j].Deliveries = atoiAny(atts[i])
					st.Deliveries[j].Body, _, _ = splitBody(strAny(bodies[i]))
					i++
				}
				var reasons []any
				if reason != nil {
					reasons = reason.Val()
				}
				for j, id := range dids {
					r := ""
					if j < len(reasons) {
						r = strAny(reasons[j])
					}
					st.DeadLetters = append(st.DeadLetters, deadLetter(id, strAny(bodies[i]), r, atoiAny(atts[i])))
					i++
				}
			}
		}
	}
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

// readLimiter reads each allowance of a limiter by asking its script for
// zero requests, with a runtime client of the allowance's client id.
func (in *Inspector) readLimiter(ctx context.Context, f *found, inst *Instance) {
	l := f.obj.lim
	def := defs.Limiter(l)
	st := &LimiterState{Algorithm: l.Algorithm, Scope: l.Scope, Capacity: def.Capacity()}
	inst.Limiter = st
	var clients []string
	if l.Scope == spec.ScopePerClient {
		for s := range f.suffixes {
			if c, ok := strings.CutPrefix(s, l.Algorithm+":"); ok {
				clients = append(clients, c)
			}
		}
		sort.Strings(clients)
		if len(clients) > in.opts.MaxItems {
			clients = clients[:in.opts.MaxItems]
		}
	} else {
		clients = []string{""}
	}
	cfg := in.rdb.Exists(ctx, keys.Sub(f.key, "cfg")).Val() == 1
	for _, c := range clients {
		r := LimiterReading{Client: c, Remaining: st.Capacity}
		if cfg {
			res, err := lockimpl.NewLimiter(in.runtimeClient(c), def, f.key).AllowN(ctx, 0)
			if err != nil {
				r.Error = err.Error()
			} else {
				r.Remaining, r.ResetAfterMs = res.Remaining, res.ResetAfter.Milliseconds()
			}
		}
		st.Clients = append(st.Clients, r)
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
