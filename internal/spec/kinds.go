package spec

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// This file is the kind table: every section of a spec, the fields of its
// objects, their JSON Schema, and what changing each field does to a
// running deployment. The parser, the unknown-field hints, the
// compatibility check (package evolve) and the schema's generator
// (schema.go) read it; adding a kind starts here (see CONTRIBUTING.md).

// Change says what changing a field's value between two versions of a
// spec does while old and new code run side by side (a rolling deploy).
type Change int

const (
	// Harmless changes only documentation.
	Harmless Change = iota
	// Identity fields make up the keys (key, params, id): changing them
	// moves the object to other keys, so old and new code exclude nobody.
	Identity
	// Breaking fields make old and new code read the same keys
	// differently (a lock's kind, a queue's codec or payload).
	Breaking
	// Behaviour fields change timing or capacity (lease, wait, permits,
	// rate): old and new code work together, but not as either expects.
	Behaviour
)

// Field is one field of an object.
type Field struct {
	Name   string
	Change Change
}

// Kind is a row of the kind table: one section of a spec.
type Kind struct {
	Section string  // "locks": the spec's top-level field
	Noun    string  // "lock": how messages name one object
	Example string  // one object in flow style, for hints
	Fields  []Field // in the order the docs give them
	// Extra lists the fields of a nested mapping field: "reliable".
	Extra map[string][]string

	// Moved says what moving an object's keys (a rename without id:)
	// does while old and new code run side by side; "" is the usual
	// "old and new replicas exclude nobody".
	Moved string

	// Keyless kinds have neither key nor params (of the fields every
	// object has, only description and id): one object is one instance,
	// whose key is its identity alone (a schedule's).
	Keyless bool

	// SpecField is the field of Spec holding the section's objects, a
	// slice of pointers to a type that embeds Object: "Locks".
	SpecField string

	parse func(p *parser, s *Spec, k *Kind, e entry)

	// The section's part of the JSON Schema, from which generateSchema
	// writes lockgen.schema.json: what one object is (Doc) and what the
	// section holds (SectionDoc); each field's schema beyond the fields
	// every object has (FieldSchemas: JSON by field name, written in the
	// order of Fields); the fields besides key that an object must have
	// (Required); and further members of the object's definition (Rules:
	// JSON object members, such as an if/then), if any.
	Doc, SectionDoc string
	FieldSchemas    map[string]string
	Required        []string
	Rules           string
}

// common are the fields every object has, first in every row.
var common = []Field{{"description", Harmless}, {"id", Identity}, {"key", Identity}, {"params", Identity}}

func fieldsOf(fs ...Field) []Field { return append(slices.Clip(common), fs...) }

// keylessFieldsOf is fieldsOf for a Keyless kind: description and id.
func keylessFieldsOf(fs ...Field) []Field { return append(slices.Clip(common[:2]), fs...) }

// Kinds is the kind table, in the order the docs (and the generated
// code) give the sections.
var Kinds = []*Kind{
	{
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
	},
	{
		Section: "semaphores", Noun: "semaphore",
		Example:    `Export: { key: "export:{tenant}", params: { tenant: string }, permits: 4 }`,
		Fields:     fieldsOf(Field{"permits", Behaviour}, Field{"lease", Behaviour}, Field{"renew", Behaviour}, Field{"wait", Behaviour}),
		SpecField:  "Semaphores",
		parse:      parseSemaphore,
		Doc:        "A distributed semaphore: at most permits holders at once.",
		SectionDoc: "Semaphores by exported Go name.",
		FieldSchemas: map[string]string{
			"permits": `{"$ref": "#/$defs/count", "description": "How many may hold it at once."}`,
			"lease":   `{"$ref": "#/$defs/duration", "description": "TTL of a permit while held. Default defaults.lease."}`,
			"renew":   `{"type": "boolean", "default": true, "description": "Whether the watchdog extends held permits. Default true."}`,
			"wait":    `{"$ref": "#/$defs/wait", "description": "Default wait of Acquire; 0 means try once. Default defaults.wait."}`,
		},
		Required: []string{"permits"},
	},
	{
		Section: "latches", Noun: "latch",
		Example:    `Warmup: { key: "warmup:{job}", params: { job: string }, count: 3 }`,
		Fields:     fieldsOf(Field{"count", Behaviour}, Field{"expire", Behaviour}),
		SpecField:  "Latches",
		parse:      parseLatch,
		Doc:        "A count-down latch: opens after count count-downs.",
		SectionDoc: "Count-down latches by exported Go name.",
		FieldSchemas: map[string]string{
			"count":  `{"$ref": "#/$defs/count", "description": "How many count-downs open the latch."}`,
			"expire": `{"$ref": "#/$defs/duration", "description": "How long the latch key lives after it was set. Default 24h.", "default": "24h"}`,
		},
		Required: []string{"count"},
	},
	{
		Section: "limiters", Noun: "limiter",
		Example: `API: { key: "api:{userID}", params: { userID: string }, algorithm: gcra, rate: 100, per: 1m }`,
		Fields: fieldsOf(Field{"algorithm", Behaviour}, Field{"rate", Behaviour}, Field{"per", Behaviour},
			Field{"burst", Behaviour}, Field{"scope", Behaviour}, Field{"idleTTL", Behaviour}),
		SpecField:  "Limiters",
		parse:      parseLimiter,
		Doc:        "A rate limiter.",
		SectionDoc: "Rate limiters by exported Go name.",
		FieldSchemas: map[string]string{
			"algorithm": `{"enum": ["gcra", "token-bucket", "sliding-window"], "description": "The limiting algorithm."}`,
			"rate":      `{"$ref": "#/$defs/count", "description": "How many requests are allowed per period."}`,
			"per":       `{"$ref": "#/$defs/duration", "description": "The period of the rate, e.g. 1m."}`,
			"burst":     `{"type": "integer", "minimum": 0, "maximum": 2147483647, "default": 0, "description": "How many requests may come at once above the rate. Default 0; sliding-window has none."}`,
			"scope":     `{"enum": ["overall", "per-client"], "default": "overall", "description": "Whether the limit is shared by all clients or applies to each. Default overall."}`,
			"idleTTL":   `{"$ref": "#/$defs/duration", "description": "The longest the limiter's keys outlive its last counted request: after that long idle it is full again. Default: until it has refilled."}`,
		},
		Required: []string{"algorithm", "rate", "per"},
		Rules:    `"if": {"properties": {"algorithm": {"const": "sliding-window"}}, "required": ["algorithm"]}, "then": {"properties": {"burst": {"const": 0}}}`,
	},
	{
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
	},
	{
		Section: "schedules", Noun: "schedule",
		Example: `Nightly: { cron: "0 3 * * *", timezone: Europe/Paris }`,
		Fields: keylessFieldsOf(Field{"cron", Behaviour}, Field{"every", Behaviour}, Field{"timezone", Behaviour},
			Field{"jitter", Behaviour}, Field{"catchUp", Behaviour}, Field{"maxCatchUp", Behaviour}, Field{"queue", Breaking}),
		Keyless:    true,
		Moved:      "old and new replicas both fire each tick",
		SpecField:  "Schedules",
		parse:      parseSchedule,
		Doc:        "A schedule: ticks by cron or period, each fired exactly once across every replica, claimed in Redis by the server's clock. Its target is a queue of the same spec (an item built per tick) or a handler the program registers.",
		SectionDoc: "Schedules by exported Go name.",
		FieldSchemas: map[string]string{
			"cron":       `{"type": "string", "minLength": 1, "description": "When it fires: a standard cron expression of 5 fields (minute hour day-of-month month day-of-week), or a descriptor such as @daily, @hourly or @every 30s. Write cron or every, not both."}`,
			"every":      `{"$ref": "#/$defs/duration", "description": "When it fires: every period, at the multiples of the period since the Unix epoch (UTC). Write cron or every, not both."}`,
			"timezone":   `{"type": "string", "minLength": 1, "description": "The IANA time zone of a cron expression, e.g. Europe/Paris. Default UTC. Not for every."}`,
			"jitter":     `{"$ref": "#/$defs/duration", "description": "Delays each tick's fire by up to this much, the same on every replica (it spreads schedules that share a tick). Less than the period. Default none."}`,
			"catchUp":    `{"enum": ["none", "latest", "all"], "default": "none", "description": "What to do with ticks nobody fired in time (no replica ran, Redis was down): none skips them (a tick later than half its period, at most a minute, is missed), latest fires the newest, all fires each, oldest first, at most maxCatchUp. Default none."}`,
			"maxCatchUp": `{"$ref": "#/$defs/count", "default": 100, "description": "With catchUp all: how many missed ticks it fires at most (the newest). Default 100."}`,
			"queue":      `{"$ref": "#/$defs/objectName", "description": "The target: a queue of this spec without params, to which each tick offers an item that the program builds per tick, in the same step as the claim. Without it the program registers a handler."}`,
		},
		Rules: `"oneOf": [{"required": ["cron"]}, {"required": ["every"]}]`,
	},
}

// isSection holds the section names, and fieldOwner the noun of the only
// kind that has a field (not one every object has, nor lease which
// several kinds have). They are set from Kinds by init, since the parsers
// in Kinds read them (variables initialised from Kinds would be an
// initialisation cycle).
var (
	isSection  = map[string]bool{}
	fieldOwner = map[string]string{}
)

func init() {
	owners := map[string][]string{}
	for _, k := range Kinds {
		isSection[k.Section] = true
		for _, f := range k.Fields {
			if isCommon(f.Name) {
				continue
			}
			owners[f.Name] = append(owners[f.Name], k.Noun)
		}
	}
	for name, nouns := range owners {
		if len(nouns) == 1 {
			fieldOwner[name] = nouns[0]
		}
	}
}

// KindOf returns the row of a section ("locks"), or nil.
func KindOf(section string) *Kind {
	for _, k := range Kinds {
		if k.Section == section {
			return k
		}
	}
	return nil
}

// FieldNames returns the names of k's fields, in order.
func (k *Kind) FieldNames() []string {
	names := make([]string, len(k.Fields))
	for i, f := range k.Fields {
		names[i] = f.Name
	}
	return names
}

// Field returns the field called name.
func (k *Kind) Field(name string) (Field, bool) {
	for _, f := range k.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// topLevel are the top-level fields before the sections.
var topLevel = []string{"version", "package", "namespace", "output", "defaults"}

// topFields returns the top-level fields, in the order the docs give them.
func topFields() []string {
	fs := slices.Clip(topLevel)
	for _, k := range Kinds {
		fs = append(fs, k.Section)
	}
	return fs
}

// sectionOfField returns the noun of the only kind that has a field of
// this name (not one every object has), or "".
func sectionOfField(name string) string { return fieldOwner[name] }

// Obj is a declared object of any kind: *Lock, *Semaphore, ...
type Obj interface {
	Common() *Object
}

// Common returns the fields every object has.
func (o *Object) Common() *Object { return o }

// Objects returns the objects of k's section in s.
func (k *Kind) Objects(s *Spec) []Obj {
	list := k.slice(s)
	out := make([]Obj, list.Len())
	for i := range out {
		out[i] = list.Index(i).Interface().(Obj)
	}
	return out
}

// slice returns the Spec field holding k's objects.
func (k *Kind) slice(s *Spec) reflect.Value {
	return reflect.ValueOf(s).Elem().FieldByName(k.SpecField)
}

// append adds o, a pointer to the section's object type, to its section.
func (k *Kind) append(s *Spec, o Obj) {
	list := k.slice(s)
	list.Set(reflect.Append(list, reflect.ValueOf(o)))
}

// sortObjects sorts every section of s by name.
func sortObjects(s *Spec) {
	for _, k := range Kinds {
		list := k.slice(s)
		name := func(i int) string { return list.Index(i).Interface().(Obj).Common().Name }
		sort.Slice(list.Interface(), func(i, j int) bool { return name(i) < name(j) })
	}
}

// Objects returns every object of s, section by section in the order of
// Kinds, each sorted by name.
func (s *Spec) Objects() []Obj {
	var out []Obj
	for _, k := range Kinds {
		out = append(out, k.Objects(s)...)
	}
	return out
}

// Values returns the settings of o as text, by field name, after
// defaults: every field of its kind that is not part of Object (those are
// compared by their own means). A nested mapping gives one entry per
// field, "reliable.visibility"; an unset one gives "reliable" = "none".
// The values come from the `spec:"name"` tags of the model's fields.
func Values(o Obj) map[string]string {
	out := map[string]string{}
	values(reflect.ValueOf(o).Elem(), "", out)
	return out
}

func values(v reflect.Value, prefix string, out map[string]string) {
	t := v.Type()
	for i := range t.NumField() {
		name, ok := t.Field(i).Tag.Lookup("spec")
		if !ok {
			continue
		}
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Pointer && f.IsNil():
			out[prefix+name] = "none"
		case f.Kind() == reflect.Pointer:
			values(f.Elem(), prefix+name+".", out)
		default:
			out[prefix+name] = text(f.Interface())
		}
	}
}

func text(v any) string {
	switch v := v.(type) {
	case time.Duration:
		return DurationString(v)
	case fmt.Stringer:
		return v.String()
	}
	return strings.TrimSpace(fmt.Sprint(v))
}

// DurationString formats d as a spec would write it: 1m rather than
// 1m0s, 1h30m rather than 1h30m0s.
func DurationString(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
