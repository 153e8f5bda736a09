package spec

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// This file is the locks: section: its row of the kind table, its
// objects' type and the parse function that reads them.

func init() {
	register(&Kind{
		Order:   1,
		Section: "locks", Noun: "lock",
		Example:    `Order: { key: "order:{orderID}", params: { orderID: int64 } }`,
		Fields:     fieldsOf(Field{"kind", Breaking}, Field{"lease", Behaviour}, Field{"renew", Behaviour}, Field{"wait", Behaviour}, Field{"sync", Behaviour}),
		Extra:      map[string][]string{"sync": {"replicas", "timeout"}},
		SpecField:  "Locks",
		parse:      parseLock,
		Doc:        "A distributed lock.",
		SectionDoc: "Locks by exported Go name.",
		FieldSchemas: map[string]string{
			"kind":  `{"enum": ["reentrant", "fair", "readwrite", "fenced", "simple", "redlock", "leader"], "default": "reentrant", "description": "The lock's kind. Default reentrant. leader: a fenced lock for leader election (Campaign, Resign, the leader's epoch)."}`,
			"lease": `{"$ref": "#/$defs/duration", "description": "TTL on the key while held. Default defaults.lease."}`,
			"renew": `{"type": "boolean", "default": true, "description": "Whether the watchdog extends the lease while held. Default true."}`,
			"wait":  `{"$ref": "#/$defs/wait", "description": "Default wait of Lock; 0 means try once. Default defaults.wait."}`,
			"sync":  `{"type": "object", "description": "Replica sync: after an acquire, wait (Redis WAIT) until this many replicas have the lock, so that it survives a failover; the acquire fails with ErrNotReplicated when fewer acknowledged while replicas are connected. Not for kind redlock.", "properties": {"replicas": {"$ref": "#/$defs/count", "description": "How many replicas must acknowledge the lock."}, "timeout": {"$ref": "#/$defs/duration", "description": "How long to wait for them. Default 1s.", "default": "1s"}}, "required": ["replicas"], "additionalProperties": false}`,
		},
	})
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

func parseLock(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	l := &Lock{Object: o, Kind: Reentrant, KindPos: o.Pos, Lease: s.Defaults.Lease, Renew: true, Wait: s.Defaults.Wait}
	kinds := make([]string, len(LockKinds))
	for i, k := range LockKinds {
		kinds[i] = string(k)
	}
	if v, n, ok := f.oneOf("kind", kinds); ok {
		l.Kind, l.KindPos = LockKind(v), p.pos(n)
	}
	f.hold(&l.Lease, &l.Renew, &l.Wait)
	if l.Kind == Leader {
		// Campaign waits as long as its context allows, and leading ends
		// only by loss or Resign: a leader's lease is always renewed.
		if r, ok := f.get("wait"); ok {
			p.errorf(r.at, "Campaign waits as long as its context allows; leave wait out", "%s: wait is not for kind leader", f.what)
		}
		if r, ok := f.get("renew"); ok && !l.Renew {
			p.errorf(r.at, "a leader's lease is renewed while it leads; leave renew out", "%s: renew: false is not for kind leader", f.what)
		}
		l.Wait, l.Renew = 0, true
	}
	if r, ok := f.get("sync"); ok {
		switch {
		case r.val.Kind != yaml.MappingNode:
			p.errorf(r.at, "for example sync: { replicas: 1, timeout: 1s }", "%s: sync must be a mapping, not %s", f.what, describe(r.val))
		case l.Kind == RedLock:
			p.errorf(r.at, "a RedLock's nodes are independent deployments; sync is for a lock on one deployment with replicas", "%s: sync is not for kind redlock", f.what)
		default:
			sf := p.fieldsOf(r.val, f.what+": sync", r.key, k.Extra["sync"])
			l.Sync = &Sync{Timeout: DefaultSyncTimeout}
			if v, ok := sf.integer("replicas", 1); ok {
				l.Sync.Replicas = v
			} else {
				sf.missing("replicas", "how many replicas must have the lock before Lock returns, e.g. replicas: 1")
			}
			if v, ok := sf.duration("timeout", false); ok {
				l.Sync.Timeout = v
			}
		}
	}
	k.append(s, l)
}
