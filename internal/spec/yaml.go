package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	suggestpkg "github.com/lockgen/lockgen/internal/suggest"
)

// This file reads yaml.Nodes: mappings with their fields, and typed
// scalars, reporting every problem with its position.

// maxMergeDepth bounds nested merge keys ("<<"), which may form cycles.
const maxMergeDepth = 8

// maxInt is the largest count a spec accepts; counts end up in Lua numbers
// and Redis replies, so this keeps them far from any precision limit.
const maxInt = 1<<31 - 1

// entry is one field of a mapping.
type entry struct {
	name string
	key  *yaml.Node // the key, for the field's position
	val  *yaml.Node // the value, aliases resolved
	at   *yaml.Node // the value as written (maybe an alias), for positions
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// describe names the kind of a YAML value for messages: "a mapping".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "empty"
		case "!!bool":
			return "a boolean"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		}
		return "a string"
	}
	return "not a value"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// entries returns the fields of mapping n in document order. It reports
// keys that are not scalars and duplicate keys, and applies merge keys
// ("<<: *base"): fields written in n win over merged ones.
func (p *parser) entries(n *yaml.Node, what string) []entry {
	return p.entriesDepth(n, what, 0)
}

func (p *parser) entriesDepth(n *yaml.Node, what string, depth int) []entry {
	// Aliases can make a small document expand to a huge one; stop
	// reading when it is far larger than the text.
	p.budget -= len(n.Content) / 2
	if p.budget < 0 {
		if !p.overBudget {
			p.overBudget = true
			p.errorf(n, "share less through aliases", "spec expands to too many fields through aliases; stopped reading here")
		}
		return nil
	}
	p.entriesRead += len(n.Content) / 2
	var out []entry
	seen := map[string]*yaml.Node{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kr := resolve(k)
		if kr.Kind != yaml.ScalarNode {
			p.errorf(k, "write a plain name before the ':'", "%s is %s; keys must be names", prefix(what, "key"), describe(kr))
			continue
		}
		if kr.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if first, dup := seen[kr.Value]; dup {
			if isSection[what] {
				p.errorf(k, fmt.Sprintf("first declared at line %d", first.Line), "duplicate name %s", kr.Value)
			} else {
				p.errorf(k, fmt.Sprintf("first at line %d", first.Line), "%s", duplicate(what, kr.Value))
			}
			continue
		}
		seen[kr.Value] = k
		out = append(out, entry{name: kr.Value, key: k, val: resolve(v), at: v})
	}
	for _, m := range merges {
		var maps []*yaml.Node
		switch mr := resolve(m); mr.Kind {
		case yaml.MappingNode:
			maps = append(maps, mr)
		case yaml.SequenceNode:
			for _, c := range mr.Content {
				if cr := resolve(c); cr.Kind == yaml.MappingNode {
					maps = append(maps, cr)
				} else {
					p.errorf(c, "write <<: *name, where &name marks a mapping", "%s: merge (<<) of %s; only mappings merge", orSpec(what), describe(cr))
				}
			}
		default:
			p.errorf(m, "write <<: *name, where &name marks a mapping", "%s: merge (<<) of %s; only mappings merge", orSpec(what), describe(mr))
		}
		for _, mm := range maps {
			if depth >= maxMergeDepth {
				p.errorf(m, "", "%s: merges (<<) nested more than %d deep", orSpec(what), maxMergeDepth)
				break
			}
			for _, e := range p.entriesDepth(mm, what, depth+1) {
				if _, dup := seen[e.name]; !dup {
					seen[e.name] = e.key
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// duplicate says a key appears twice in the mapping what.
func duplicate(what, key string) string {
	if obj, ok := strings.CutSuffix(what, ": params"); ok {
		return prefix(obj, fmt.Sprintf("param %s is declared twice", key))
	}
	return prefix(what, fmt.Sprintf("field %q is set twice", key))
}

// prefix puts the context what before msg: "lock Order: msg".
func prefix(what, msg string) string {
	if what == "" {
		return msg
	}
	return what + ": " + msg
}

func orSpec(what string) string {
	if what == "" {
		return "spec"
	}
	return what
}

// fields is a mapping read as a set of named fields.
type fields struct {
	p    *parser
	what string     // context for messages: "lock Order", "defaults", ""
	at   *yaml.Node // where to report missing fields
	m    map[string]entry
	list []entry // the known fields in document order
}

// fieldsOf reads mapping n, reporting unknown fields. allowed lists the
// known field names in the order the docs give them; kind names the
// object kind for hints ("lock"), or "" at the top level.
func (p *parser) fieldsOf(n *yaml.Node, what string, at *yaml.Node, allowed []string) *fields {
	f := &fields{p: p, what: what, at: at, m: map[string]entry{}}
	for _, e := range p.entries(n, what) {
		if what == "" && strings.HasPrefix(e.name, "x-") {
			continue // an extension field, e.g. to hold anchors
		}
		if !contains(allowed, e.name) {
			p.errorf(e.key, unknownFieldHint(e.name, what, allowed), "%s", prefix(what, fmt.Sprintf("unknown field %q", e.name)))
			continue
		}
		f.m[e.name] = e
		f.list = append(f.list, e)
	}
	return f
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// unknownFieldHint suggests the allowed field closest to name, or lists
// them all.
func unknownFieldHint(name, what string, allowed []string) string {
	if s := suggest(name, allowed); s != "" {
		return fmt.Sprintf("did you mean %q?", s)
	}
	if k := sectionOfField(name); k != "" && !strings.HasPrefix(what, k+" ") {
		return fmt.Sprintf("%s is a field of %s; here the fields are %s", name, k+"s", strings.Join(allowed, ", "))
	}
	return "the fields are " + strings.Join(allowed, ", ")
}

// suggest returns the candidate closest to s, when it is close enough
// to be a likely typo, or "" (see package suggest).
func suggest(s string, candidates []string) string { return suggestpkg.Closest(s, candidates) }

// get returns the field name when it is set to a value. A field set to
// nothing ("lease:") is reported and treated as unset.
func (f *fields) get(name string) (entry, bool) {
	e, ok := f.m[name]
	if !ok {
		return e, false
	}
	if isNull(e.val) {
		f.p.errorf(e.at, "give it a value or remove the line", "%s", prefix(f.what, name+" has no value"))
		return e, false
	}
	return e, true
}

// has reports whether the field is written, with or without a value.
func (f *fields) has(name string) bool {
	_, ok := f.m[name]
	return ok
}

// missing reports a required field that is not set.
func (f *fields) missing(name, hint string) {
	if _, ok := f.m[name]; ok {
		return // set to nothing: reported by get
	}
	f.p.errorf(f.at, hint, "%s", prefix(f.what, fmt.Sprintf("missing required field %q", name)))
}

// str reads a string field; any scalar is taken as its text.
func (f *fields) str(name string) (string, *yaml.Node, bool) {
	e, ok := f.get(name)
	if !ok {
		return "", nil, false
	}
	if e.val.Kind != yaml.ScalarNode {
		f.p.errorf(e.at, "", "%s", prefix(f.what, fmt.Sprintf("%s must be a string, not %s", name, describe(e.val))))
		return "", nil, false
	}
	return e.val.Value, e.val, true
}

// integer reads an integer field that must be in [lo, maxInt].
func (f *fields) integer(name string, lo int) (int, bool) {
	e, ok := f.get(name)
	if !ok {
		return 0, false
	}
	v := e.val
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		hint := ""
		if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" {
			if _, err := strconv.Atoi(strings.TrimSpace(v.Value)); err == nil {
				hint = "write the number without quotes"
			}
		}
		f.p.errorf(e.at, hint, "%s", prefix(f.what, fmt.Sprintf("%s must be a whole number, not %s", name, describe(v))))
		return 0, false
	}
	var n int64
	if err := v.Decode(&n); err != nil || n > maxInt {
		f.p.errorf(e.at, "", "%s", prefix(f.what, fmt.Sprintf("%s %s is too large (at most %d)", name, v.Value, maxInt)))
		return 0, false
	}
	if n < int64(lo) {
		if n < -maxInt {
			n = -maxInt
		}
		f.p.errorf(e.at, "", "%s", prefix(f.what, fmt.Sprintf("%s must be at least %d, not %d", name, lo, n)))
		return 0, false
	}
	return int(n), true
}

// boolean reads a true/false field.
// hold reads the lease, renew and wait fields of something held (a lock,
// a semaphore) into what is given, leaving the defaults where a field is
// absent or wrong (a wrong one is reported).
func (f *fields) hold(lease *time.Duration, renew *bool, wait *time.Duration) {
	if v, ok := f.duration("lease", false); ok {
		*lease = v
	}
	if v, ok := f.boolean("renew"); ok {
		*renew = v
	}
	if v, ok := f.duration("wait", true); ok {
		*wait = v
	}
}

func (f *fields) boolean(name string) (bool, bool) {
	e, ok := f.get(name)
	if !ok {
		return false, false
	}
	v := e.val
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		f.p.errorf(e.at, "write true or false", "%s", prefix(f.what, fmt.Sprintf("%s must be true or false, not %s", name, quoteValue(v))))
		return false, false
	}
	var b bool
	if err := v.Decode(&b); err != nil {
		f.p.errorf(e.at, "write true or false", "%s", prefix(f.what, fmt.Sprintf("%s must be true or false, not %s", name, quoteValue(v))))
		return false, false
	}
	return b, true
}

// quoteValue shows a scalar's text, or describes another value.
func quoteValue(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		return strconv.Quote(n.Value)
	}
	return describe(n)
}

const durationHint = `durations look like "30s" or "1m30s"`

// duration reads a duration field in Go syntax. It must be a whole number
// of milliseconds (Redis expires keys in milliseconds), and positive, or
// not negative when zero is allowed.
func (f *fields) duration(name string, zeroOK bool) (time.Duration, bool) {
	e, ok := f.get(name)
	if !ok {
		return 0, false
	}
	v := e.val
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!str" && v.ShortTag() != "!!int" && v.ShortTag() != "!!float") {
		f.p.errorf(e.at, durationHint, "%s", prefix(f.what, fmt.Sprintf("%s must be a duration, not %s", name, describe(v))))
		return 0, false
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		hint := durationHint
		if _, err := strconv.ParseFloat(v.Value, 64); err == nil {
			hint = fmt.Sprintf(`a duration needs a unit: "%ss" is %s %s`, v.Value, v.Value, plural(v.Value, "second"))
		}
		f.p.errorf(e.at, hint, "%s", prefix(f.what, fmt.Sprintf("%s %q is not a duration", name, v.Value)))
		return 0, false
	}
	switch {
	case d < 0 || d == 0 && !zeroOK:
		want := "positive"
		if zeroOK {
			want = "zero or positive"
		}
		f.p.errorf(e.at, "", "%s", prefix(f.what, fmt.Sprintf("%s must be %s, not %s", name, want, v.Value)))
		return 0, false
	case d%time.Millisecond != 0:
		f.p.errorf(e.at, "Redis counts time in milliseconds", "%s", prefix(f.what, fmt.Sprintf("%s %s is not a whole number of milliseconds", name, v.Value)))
		return 0, false
	}
	return d, true
}

// oneOf reads a string field whose value must be one of allowed.
func (f *fields) oneOf(name string, allowed []string) (string, *yaml.Node, bool) {
	s, n, ok := f.str(name)
	if !ok {
		return "", nil, false
	}
	if !contains(allowed, s) {
		hint := strings.Join(allowed, " | ")
		if g := suggest(s, allowed); g != "" {
			hint = fmt.Sprintf("did you mean %q? %s is one of %s", g, name, hint)
		} else {
			hint = fmt.Sprintf("%s is one of %s", name, hint)
		}
		f.p.errorf(n, hint, "%s", prefix(f.what, fmt.Sprintf("unknown %s %q", name, s)))
		return "", nil, false
	}
	return s, n, true
}

// plural returns noun, or its plural unless number is 1.
func plural(number, noun string) string {
	if n, err := strconv.ParseFloat(number, 64); err == nil && n == 1 {
		return noun
	}
	return noun + "s"
}
