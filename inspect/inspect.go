// Package inspect reads the live state of the objects of a lockgen spec
// from Redis, through the spec's key layout, and performs the operator's
// actions on them (force-unlock, redrive, purge, set permits, and on one
// queue item by id: RemoveItem, RedriveItem, RunItemNow). It is what
// `lockgen inspect` and the dashboard are built on.
//
// Instances are found with SCAN over the namespace (never KEYS), on every
// primary of a cluster, within a budget of keys visited (Options.MaxScan),
// and their params are decoded from the keys (keys.Decode). Reads are
// pipelined: one round trip per node for all instances of a listing, plus
// one script call per limiter instance (its state needs the server's clock
// and the algorithm). Lists inside an instance (waiters, holders, in-flight
// deliveries, dead letters) are cut at Options.MaxItems.
//
// A queue instance lists its first items of each kind by id (QueueState:
// ReadyItems, DelayedItems, Deliveries, DeadLetters), and Item finds one
// by id wherever it is. The item actions run the runtime's item script
// (templates/queue_item.lua, the one behind its RunNow, BuryID, RedriveID
// and RemoveID), which finds where the item is and acts in the same run,
// waking a waiting Take for an item it makes ready; it records its
// operation for a minute, so that go-redis sending it
// again after a lost reply gets the first run's answer. They are safe to
// run twice: ItemResult says where the item was (nowhere, the second
// time) and whether the action changed it, and Refused tells an item the
// action does not apply to (a remove of one in flight) from one already
// gone.
//
// Reading never writes, with one exception: a limiter is read by its own
// decision script asking for zero requests, which refreshes the expiry of
// its config; an instance whose config has expired is reported full
// without running the script.
package inspect

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime"
)

// Errors of the package, matchable with errors.Is.
var (
	// ErrUnknownObject: the spec declares no object of that name.
	ErrUnknownObject = errors.New("inspect: no such object in the spec")
	// ErrBadParams: the params given do not fit the object's key.
	ErrBadParams = errors.New("inspect: bad params")
	// ErrUnsupported: the action does not apply to the object's kind.
	ErrUnsupported = errors.New("inspect: action not supported for this kind")
)

// Object kinds as inspect reports them: the lock kinds of the spec, and
// one word for each other section. Each is its kind's (see kind).
const (
	KindSemaphore = "semaphore"
	KindLatch     = "latch"
	KindLimiter   = "limiter"
	KindQueue     = "queue"
)

// Options bound the work of an Inspector.
type Options struct {
	// MaxScan is how many keys SCAN may visit per node for one listing
	// (0: 100000). A listing cut short says so (Truncated).
	MaxScan int
	// MaxInstances is how many instances of one object a listing reads
	// (0: 1000).
	MaxInstances int
	// MaxItems is how many entries of a list inside one instance are
	// shown: waiters, holders, deliveries, dead letters (0: 20).
	MaxItems int
}

func (o Options) withDefaults() Options {
	if o.MaxScan <= 0 {
		o.MaxScan = 100000
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = 1000
	}
	if o.MaxItems <= 0 {
		o.MaxItems = 20
	}
	return o
}

// Inspector reads and changes the live state of one spec's objects. It is
// safe for concurrent use.
type Inspector struct {
	rdb  redis.UniversalClient
	spec *spec.Spec
	opts Options
	objs []*object
	byNm map[string]*object

	mu  sync.Mutex
	rts map[string]*runtime.Client // by client id ("" for the inspector's own)
}

// object is one declared object with what reading it needs.
type object struct {
	name     string
	id       string // the name in its keys: spec id:, or name
	kind     string
	pattern  string
	params   []spec.Param
	literals []string

	obj spec.Obj // *spec.Lock, *spec.Semaphore, ...
	k   kind     // its kind's home in this package
}

// Load reads and validates the spec at path and returns an Inspector of
// its objects over rdb. It returns the spec's errors as `lockgen check`
// reports them.
func Load(rdb redis.UniversalClient, path string, opts Options) (*Inspector, error) {
	s, err := spec.Load(path)
	if err != nil {
		return nil, err
	}
	return newInspector(rdb, s, opts), nil
}

// Parse is Load for a spec held in memory; file names it in errors.
func Parse(rdb redis.UniversalClient, file string, data []byte, opts Options) (*Inspector, error) {
	s, err := spec.Parse(file, data)
	if err != nil {
		return nil, err
	}
	return newInspector(rdb, s, opts), nil
}

func newInspector(rdb redis.UniversalClient, s *spec.Spec, opts Options) *Inspector {
	in := &Inspector{rdb: rdb, spec: s, opts: opts.withDefaults(), byNm: map[string]*object{}, rts: map[string]*runtime.Client{}}
	for _, obj := range s.Objects() {
		c := obj.Common()
		k := kindOfSection[c.Section]
		if k == nil {
			panic("inspect: no kind for section " + c.Section + " (see CONTRIBUTING.md, Adding a kind of object)")
		}
		o := &object{name: c.Name, id: c.Identity(), kind: k.name(obj), pattern: c.Key.Pattern, params: c.Key.Params, literals: c.Key.Literals, obj: obj, k: k}
		in.objs = append(in.objs, o)
		in.byNm[o.name] = o
	}
	sort.Slice(in.objs, func(i, j int) bool { return in.objs[i].name < in.objs[j].name })
	return in
}

// Namespace returns the spec's namespace.
func (in *Inspector) Namespace() string { return in.spec.Namespace }

// Redis returns the Redis client the inspector was given.
func (in *Inspector) Redis() redis.UniversalClient { return in.rdb }

// Close stops the runtime clients the inspector made for its actions. It
// does not close the Redis client it was given.
func (in *Inspector) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	for id, c := range in.rts {
		c.Close()
		delete(in.rts, id)
	}
	return nil
}

// runtimeClient returns a runtime client over the inspector's Redis
// connection with the given id ("" for a random one).
func (in *Inspector) runtimeClient(id string) *runtime.Client {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := in.rts[id]
	if c == nil {
		var opts []runtime.Option
		if id != "" {
			opts = append(opts, runtime.WithID(id))
		}
		c = runtime.New(in.rdb, opts...)
		in.rts[id] = c
	}
	return c
}

// ObjectInfo describes one declared object.
type ObjectInfo struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Pattern string   `json:"pattern"`
	Params  []string `json:"params"`
}

// Objects lists the spec's objects, sorted by name.
func (in *Inspector) Objects() []ObjectInfo {
	out := make([]ObjectInfo, 0, len(in.objs))
	for _, o := range in.objs {
		out = append(out, o.info())
	}
	return out
}

func (o *object) info() ObjectInfo {
	ps := make([]string, len(o.params))
	for i, p := range o.params {
		ps[i] = p.Name
	}
	return ObjectInfo{Name: o.name, Kind: o.kind, Pattern: o.pattern, Params: ps}
}

func (in *Inspector) object(name string) (*object, error) {
	o := in.byNm[name]
	if o == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownObject, name)
	}
	return o, nil
}

// Key returns the Redis key of object's instance with the given param
// values (as their Go values print: 42, "acme"), or ErrUnknownObject or
// ErrBadParams.
func (in *Inspector) Key(object string, values ...string) (string, error) {
	o, err := in.object(object)
	if err != nil {
		return "", err
	}
	if len(values) != len(o.params) {
		return "", fmt.Errorf("%w: %s takes %d params (%s), got %d", ErrBadParams, o.name, len(o.params), strings.Join(o.info().Params, ", "), len(values))
	}
	for i, p := range o.params {
		if err := checkValue(p.Type.Basic, values[i]); err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrBadParams, p.Name, err)
		}
	}
	return keys.Build(in.spec.Namespace, o.id, o.literals, values...), nil
}

// checkValue reports a value that the generated code could not produce for
// a param of basic type t ("" when unknown: anything goes).
func checkValue(t, v string) error {
	switch {
	case strings.HasPrefix(t, "int"):
		_, err := strconv.ParseInt(v, 10, 64)
		return err
	case strings.HasPrefix(t, "uint"):
		_, err := strconv.ParseUint(v, 10, 64)
		return err
	}
	return nil
}
