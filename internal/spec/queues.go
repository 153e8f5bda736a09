package spec

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file is the queues: section: its row of the kind table, its
// objects' types and the parse functions that read them.

func init() {
	register(&Kind{
		Order:   5,
		Section: "queues", Noun: "queue",
		Example: `OrderClose: { key: "order-close", payload: example.com/orders.CloseRequest }`,
		Fields: fieldsOf(Field{"payload", Breaking}, Field{"codec", Breaking}, Field{"delay", Behaviour},
			Field{"reliable", Behaviour}, Field{"unique", Behaviour}, Field{"retention", Behaviour}),
		Extra:      map[string][]string{"reliable": {"visibility", "maxDeliveries", "dedupe"}, "retention": {"for", "max"}},
		SpecField:  "Queues",
		parse:      parseQueue,
		Doc:        "A queue of typed items.",
		SectionDoc: "Queues by exported Go name.",
		FieldSchemas: map[string]string{
			"payload":   `{"type": "string", "anyOf": [{"enum": ["string", "[]byte"]}, {"pattern": "^[A-Za-z0-9._~+-]+(/[A-Za-z0-9._~+-]+)*\\.\\p{Lu}[\\p{L}\\p{Nd}_]*$"}], "description": "The Go type of an item: \"import/path.Type\", string or []byte."}`,
			"codec":     `{"anyOf": [{"enum": ["json", "protobuf", "bytes", "string"]}, {"pattern": "^[A-Za-z0-9._~+-]+(/[A-Za-z0-9._~+-]+)+\\.\\p{Lu}[\\p{L}\\p{Nd}_]*$"}], "default": "json", "description": "How items are encoded: json (default), protobuf (a protoc-gen-go message payload), bytes ([]byte payloads), string (string payloads), or a custom codec's \"import/path.Type\"."}`,
			"delay":     `{"type": "boolean", "default": false, "description": "Whether items may be offered with a delay. Default false."}`,
			"unique":    `{"$ref": "#/$defs/duration", "description": "A reliable queue's unique window: how long Enqueue with lockrt.Unique(key) keeps the key, and a repeat within it adds nothing and returns the first item's id. Default: none."}`,
			"retention": `{"type": "object", "description": "Keep a reliable queue's acknowledged items to inspect what ran (lockgen inspect, the dashboard, ReliableQueue.Completed): the newest max, shown for a while. An Ack then costs five Redis commands more, in the same script call. Default: none.", "properties": {"for": {"$ref": "#/$defs/duration", "description": "How long an acknowledged item is shown."}, "max": {"$ref": "#/$defs/count", "description": "How many acknowledged items are kept at most, newest first. Default 1000.", "default": 1000}}, "required": ["for"], "additionalProperties": false}`,
			"reliable":  `{"type": "object", "description": "Acknowledged delivery: an item taken and not acknowledged within visibility is delivered again, up to maxDeliveries times, then dead-lettered.", "properties": {"visibility": {"$ref": "#/$defs/duration", "description": "How long a taken item stays hidden before it is delivered again."}, "maxDeliveries": {"$ref": "#/$defs/count", "description": "How many times an item is delivered before it is dead-lettered. Default 5.", "default": 5}, "dedupe": {"$ref": "#/$defs/duration", "description": "The first spelling of the queue's unique: (give one of them)."}}, "required": ["visibility"], "additionalProperties": false}`,
		},
		Required: []string{"payload"},
	})
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

// Reliable configures acknowledged delivery.
type Reliable struct {
	Visibility    time.Duration `spec:"visibility"`
	MaxDeliveries int           `spec:"maxDeliveries"`
	// reliable.dedupe, the first spelling of unique:, is read into
	// Queue.Unique.
}

func parseQueue(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	q := &Queue{Object: o, Codec: DefaultCodec}
	if v, n, ok := f.str("payload"); ok {
		q.PayloadPos = p.pos(n)
		if t, hint := parsePayload(v); hint != "" {
			p.errorf(n, hint, "%s: payload %q is not a type lockgen can use", f.what, v)
		} else {
			q.Payload = t
		}
	} else {
		f.missing("payload", "the Go type of an item, e.g. payload: github.com/acme/shop/orders.CloseRequest")
	}
	parseCodec(p, f, q)
	if v, ok := f.boolean("delay"); ok {
		q.Delay = v
	}
	if r, ok := f.get("reliable"); ok {
		if r.val.Kind != yaml.MappingNode {
			p.errorf(r.at, "for example reliable: { visibility: 30s, maxDeliveries: 5 }", "%s: reliable must be a mapping, not %s", f.what, describe(r.val))
		} else {
			rf := p.fieldsOf(r.val, f.what+": reliable", r.key, k.Extra["reliable"])
			q.Reliable = &Reliable{MaxDeliveries: DefaultMaxDeliveries}
			if v, ok := rf.duration("visibility", false); ok {
				q.Reliable.Visibility = v
			} else {
				rf.missing("visibility", "how long a taken item stays hidden before it is delivered again, e.g. visibility: 30s")
			}
			if v, ok := rf.integer("maxDeliveries", 1); ok {
				q.Reliable.MaxDeliveries = v
			}
			if v, ok := rf.duration("dedupe", false); ok {
				q.Unique = v // unique:'s first spelling
			}
		}
	}
	if e, ok := f.get("unique"); ok {
		if v, ok := f.duration("unique", false); ok {
			switch {
			case q.Reliable == nil:
				p.errorf(e.key, "add reliable: { visibility: 30s }, or remove unique", "%s: unique needs a reliable queue (Enqueue is a reliable queue's)", f.what)
			case q.Unique != 0:
				p.errorf(e.key, "keep unique: and remove reliable.dedupe (its first spelling)", "%s: unique and reliable.dedupe both set the unique window", f.what)
			default:
				q.Unique = v
			}
		}
	}
	if r, ok := f.get("retention"); ok {
		switch {
		case r.val.Kind != yaml.MappingNode:
			p.errorf(r.at, "for example retention: { for: 1h, max: 1000 }", "%s: retention must be a mapping, not %s", f.what, describe(r.val))
		case q.Reliable == nil:
			p.errorf(r.key, "add reliable: { visibility: 30s }, or remove retention", "%s: retention needs a reliable queue (it keeps acknowledged items)", f.what)
		default:
			rf := p.fieldsOf(r.val, f.what+": retention", r.key, k.Extra["retention"])
			q.Retention = &Retention{Max: DefaultRetainMax}
			if v, ok := rf.duration("for", false); ok {
				q.Retention.For = v
			} else {
				rf.missing("for", "how long an acknowledged item is kept to inspect, e.g. for: 1h")
			}
			if v, ok := rf.integer("max", 1); ok {
				q.Retention.Max = v
			}
		}
	}
	k.append(s, q)
}

// parsePayload parses a queue's payload type, or returns a hint saying
// what is wrong with it.
func parsePayload(s string) (PayloadType, string) {
	const want = `write "import/path.Type", string or []byte`
	switch {
	case s == "string" || s == "[]byte":
		return PayloadType{TypeName: s}, ""
	case strings.HasPrefix(s, "*"):
		return PayloadType{}, "payloads are passed by value; write the type without '*'"
	}
	path, name, ok := splitQualified(s)
	switch {
	case !ok && isExported(s):
		return PayloadType{}, fmt.Sprintf(`a named type needs its import path, e.g. "example.com/orders.%s"`, s)
	case !ok:
		return PayloadType{}, want
	case !validImportPath(path):
		return PayloadType{}, fmt.Sprintf("%q is not an import path; %s", path, want)
	case !isExported(name):
		return PayloadType{}, fmt.Sprintf("%q is not an exported type name; %s", name, want)
	}
	return PayloadType{ImportPath: path, TypeName: name}, ""
}

// parseCodec reads a queue's codec: a name from Codecs, which must suit
// the payload, or a custom codec's "import/path.Type".
func parseCodec(p *parser, f *fields, q *Queue) {
	v, n, ok := f.str("codec")
	if !ok {
		return
	}
	q.CodecPos = p.pos(n)
	if path, name, ok := splitQualified(v); ok && strings.Contains(v, "/") {
		if !validImportPath(path) || !isExported(name) {
			p.errorf(n, `a custom codec is an exported type named by import path, e.g. "example.com/codecs.Msgpack"`,
				"%s: codec %q is not a type lockgen can use", f.what, v)
			return
		}
		q.Codec, q.CustomCodec = v, &PayloadType{ImportPath: path, TypeName: name}
		return
	}
	if _, _, ok := f.oneOf("codec", Codecs); !ok {
		return
	}
	q.Codec = v
	payload := q.Payload.String()
	switch {
	case payload == "":
		// the payload's own error was reported
	case v == "bytes" && payload != "[]byte", v == "string" && payload != "string":
		want := map[string]string{"bytes": "[]byte", "string": "string"}[v]
		p.errorf(n, fmt.Sprintf("write payload: %q, or choose codec: json", want),
			"%s: codec %s carries %s payloads, not %s", f.what, v, want, payload)
	case v == "protobuf" && q.Payload.ImportPath == "":
		p.errorf(n, "name the message type protoc-gen-go generated, e.g. payload: example.com/pb.CloseRequest",
			"%s: codec protobuf needs a protobuf message payload, not %s", f.what, payload)
	}
}
