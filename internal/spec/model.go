package spec

import (
	"fmt"
	"time"
)

// Version is the only spec format version this lockgen reads.
const Version = 1

// DefaultOutput is the generated file's name when the spec sets no output.
const DefaultOutput = "lockgen.gen.go"

// Pos is a position in a spec file. Line and Col are 1-based.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Spec is a validated lockgen spec. Every object list is sorted by Name.
type Spec struct {
	File      string // the path the spec was read from, as given
	Version   int
	Package   string // Go package name of the generated file
	Namespace string // first segment of every key
	Output    string // generated file name, relative to the spec's directory
	Defaults  Defaults
	// Fields holds the positions of the top-level fields written in the
	// file ("namespace", "locks", ...), at their values.
	Fields map[string]Pos

	Locks      []*Lock
	Semaphores []*Semaphore
	Latches    []*Latch
	Limiters   []*Limiter
	Queues     []*Queue
	Schedules  []*Schedule
}

// Defaults apply to every object that does not set the field itself.
type Defaults struct {
	Lease time.Duration // default 30s
	Wait  time.Duration // default 10s
}

// Object is what every declared object has.
type Object struct {
	Name        string // exported Go name, unique across the spec
	Section     string // "locks", "queues", ... (see Kinds)
	Description string // becomes the doc comment; may be empty
	Pos         Pos    // position of the name
	// ID is the object's key identity when the spec sets id: (the name
	// of the object inside every key's hash tag), so that the Go name
	// can change without moving keys. Empty means Name.
	ID  string
	Key Key
	// Fields holds the positions of the fields written in the spec, at
	// their values, by field name.
	Fields map[string]Pos
}

// Identity is the object's name inside its keys: ID, or else Name.
func (o *Object) Identity() string {
	if o.ID != "" {
		return o.ID
	}
	return o.Name
}

// FieldPos returns the position of a field's value, or the object's
// position when the field is not written (it has its default).
func (o *Object) FieldPos(name string) Pos {
	if p, ok := o.Fields[name]; ok {
		return p
	}
	return o.Pos
}

// Key is an object's key pattern with its typed params.
type Key struct {
	Pattern string
	Pos     Pos // position of the pattern's value
	// Literals has len(Params)+1 elements: the text around the placeholders
	// (see keys.Pattern).
	Literals []string
	Params   []Param // in placeholder order, which is the Go argument order
}

// Param is one typed key parameter.
type Param struct {
	Name string
	Type ParamType
	Pos  Pos // position of the type
}

// ParamType is a param's Go type: a basic type (int, int8..int64,
// uint..uint64, string) or a named type from a Go package
// ("github.com/acme/shop/ids.TenantID") whose underlying type is basic.
type ParamType struct {
	Basic      string // "int64", "string", ...; for named types the underlying type once resolved, else ""
	ImportPath string // for named types
	TypeName   string // for named types
}

// Named reports whether the type is a named type from a package.
func (t ParamType) Named() bool { return t.ImportPath != "" }

func (t ParamType) String() string {
	if t.Named() {
		return t.ImportPath + "." + t.TypeName
	}
	return t.Basic
}

// LockKind is a lock's kind.
type LockKind string

// The lock kinds of spec version 1.
const (
	Reentrant LockKind = "reentrant"
	Fair      LockKind = "fair"
	ReadWrite LockKind = "readwrite"
	Fenced    LockKind = "fenced"
	Simple    LockKind = "simple"
	RedLock   LockKind = "redlock"
	// Leader is a fenced lock used for leader election: its generated
	// type campaigns (lockrt.Election) instead of locking, and its
	// fencing tokens are the leaders' epochs.
	Leader LockKind = "leader"
)

// LockKinds lists every lock kind, in the order the docs give them.
var LockKinds = []LockKind{Reentrant, Fair, ReadWrite, Fenced, Simple, RedLock, Leader}

// Lock is an entry of locks:.
type Lock struct {
	Object
	Kind    LockKind `spec:"kind"`
	KindPos Pos
	Lease   time.Duration `spec:"lease"` // TTL on the key while held
	Renew   bool          `spec:"renew"` // the watchdog extends the lease while held
	Wait    time.Duration `spec:"wait"`  // default wait of Lock
	Sync    *Sync         `spec:"sync"`  // nil: no WAIT after an acquire
}

// Sync makes an acquire wait until replicas have the lock (Redis WAIT),
// so that it survives a failover.
type Sync struct {
	Replicas int           `spec:"replicas"` // how many replicas must acknowledge
	Timeout  time.Duration `spec:"timeout"`  // how long to wait for them
}

// DefaultSyncTimeout is a sync's timeout when the spec gives none.
const DefaultSyncTimeout = time.Second

// Semaphore is an entry of semaphores:.
type Semaphore struct {
	Object
	Permits int           `spec:"permits"`
	Lease   time.Duration `spec:"lease"`
	Renew   bool          `spec:"renew"`
	Wait    time.Duration `spec:"wait"`
}

// Latch is an entry of latches:.
type Latch struct {
	Object
	Count  int           `spec:"count"`
	Expire time.Duration `spec:"expire"` // how long a latch key lives after it was set; default 24h
}

// Limiter algorithms.
const (
	GCRA          = "gcra"
	TokenBucket   = "token-bucket"
	SlidingWindow = "sliding-window"
)

// Limiter scopes.
const (
	ScopeOverall   = "overall"
	ScopePerClient = "per-client"
)

// Limiter is an entry of limiters:.
type Limiter struct {
	Object
	Algorithm string        `spec:"algorithm"`
	Rate      int           `spec:"rate"`
	Per       time.Duration `spec:"per"`
	Burst     int           `spec:"burst"`
	Scope     string        `spec:"scope"`
	// IdleTTL caps how long the limiter's keys outlive its last counted
	// request; 0 (the default): until it is full again.
	IdleTTL time.Duration `spec:"idleTTL"`
}

// Queue is an entry of queues:.
type Queue struct {
	Object
	Payload    PayloadType `spec:"payload"`
	PayloadPos Pos
	Codec      string `spec:"codec"` // one of Codecs ("json" by default), or a custom codec's "import/path.Type"
	CodecPos   Pos
	// CustomCodec is the type of a custom codec, when Codec names one.
	CustomCodec *PayloadType
	Delay       bool      `spec:"delay"`
	Reliable    *Reliable `spec:"reliable"` // nil when not reliable
	// Unique is how long a key of Enqueue's lockrt.Unique(key) is kept (a
	// reliable queue's): unique:, or its first spelling reliable.dedupe.
	// 0: none.
	Unique time.Duration `spec:"unique"`
	// Retention keeps a reliable queue's acknowledged items for a while,
	// to inspect what ran; nil: none.
	Retention *Retention `spec:"retention"`
}

// Retention configures how acknowledged items are kept.
type Retention struct {
	For time.Duration `spec:"for"` // how long an acknowledged item is shown
	Max int           `spec:"max"` // how many are kept at most, newest first
}

// DefaultRetainMax is how many acknowledged items retention keeps by
// default.
const DefaultRetainMax = 1000

// PayloadType names a Go type by import path.
type PayloadType struct {
	ImportPath string // "" for a predeclared type such as string or []byte
	TypeName   string
}

func (t PayloadType) String() string {
	if t.ImportPath == "" {
		return t.TypeName
	}
	return t.ImportPath + "." + t.TypeName
}

// Reliable configures acknowledged delivery.
type Reliable struct {
	Visibility    time.Duration `spec:"visibility"`
	MaxDeliveries int           `spec:"maxDeliveries"`
	// reliable.dedupe, the first spelling of unique:, is read into
	// Queue.Unique.
}

// Schedule catch-up policies: what a schedule does with ticks nobody
// fired in time (no replica ran, Redis was down).
const (
	CatchUpNone   = "none"   // skip them
	CatchUpLatest = "latest" // fire the newest of them
	CatchUpAll    = "all"    // fire each, oldest first, at most maxCatchUp (the newest)
)

// CatchUps lists the catch-up policies, in the order the docs give them.
var CatchUps = []string{CatchUpNone, CatchUpLatest, CatchUpAll}

// DefaultMaxCatchUp bounds catchUp: all when the spec gives no maxCatchUp.
const DefaultMaxCatchUp = 100

// Schedule is an entry of schedules:. It has no key pattern nor params:
// its state is one hash, namespace:{Name:}, or, when it targets a queue,
// under the queue's hash tag (<queue key>:schedule:<Name>), so that
// claiming a tick and offering its item are one script on one slot.
type Schedule struct {
	Object
	Cron       string        `spec:"cron"`  // a cron expression or descriptor; "" when Every is set
	Every      time.Duration `spec:"every"` // the period; 0 when Cron is set
	Timezone   string        `spec:"timezone"`
	Jitter     time.Duration `spec:"jitter"`
	CatchUp    string        `spec:"catchUp"`
	MaxCatchUp int           `spec:"maxCatchUp"` // catchUp all only
	// Queue names the target queue of the same spec, or "" for a
	// handler the program registers.
	Queue    string `spec:"queue"`
	QueuePos Pos
	// Target is the queue Queue names, once resolved.
	Target *Queue
}
