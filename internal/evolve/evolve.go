// Package evolve compares two versions of a spec, as a rolling deploy
// runs them side by side: old replicas with the old spec's code, new ones
// with the new. A change that makes the two disagree about keys or their
// contents is Breaking (an object renamed or removed, its key pattern,
// param order or types, its kind, the namespace, a queue's codec or an
// incompatible payload type); a change of timing or capacity is a
// Warning (lease, wait, permits, rate, ...). What each field's change
// is comes from the kind table, spec.Kinds.
package evolve

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockgen/lockgen/internal/gotypes"
	"github.com/lockgen/lockgen/internal/spec"
)

// Severity ranks a finding.
type Severity int

const (
	Warning  Severity = iota // old and new code work together, differently
	Breaking                 // old and new code exclude nobody or misread each other
)

func (s Severity) String() string {
	if s == Breaking {
		return "error"
	}
	return "warning"
}

// Finding is one difference between the old and the new spec, at a
// position in the new one.
type Finding struct {
	Pos      spec.Pos
	Severity Severity
	Msg      string
	Hint     string
}

// String formats f as "file:line:col: msg (hint)", with "warning: "
// before the message of a warning.
func (f Finding) String() string {
	d := spec.Diagnostic{Pos: f.Pos, Msg: f.Msg, Hint: f.Hint}
	if f.Severity == Warning {
		d.Msg = "warning: " + d.Msg
	}
	return d.String()
}

// Payloads are the shapes of the queues' payload types in the old and the
// new code, by the type's name (spec.PayloadType.String()). A type
// missing from Old is compared by name only.
type Payloads struct {
	Old, Cur map[string]gotypes.Shape
}

// Compare returns the findings of going from old to cur, sorted by
// position. The base is named in messages ("at main").
func Compare(old, cur *spec.Spec, base string, payloads Payloads) []Finding {
	c := &comparer{old: old, cur: cur, base: base, payloads: payloads}
	c.compare()
	slices.SortStableFunc(c.out, func(a, b Finding) int {
		switch {
		case a.Pos.Line != b.Pos.Line:
			return a.Pos.Line - b.Pos.Line
		default:
			return a.Pos.Col - b.Pos.Col
		}
	})
	return c.out
}

type comparer struct {
	old, cur *spec.Spec
	base     string
	payloads Payloads
	out      []Finding
}

func (c *comparer) add(pos spec.Pos, sev Severity, hint, format string, args ...any) {
	c.out = append(c.out, Finding{Pos: pos, Severity: sev, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// top returns the position of a top-level field of the new spec, or 1:1.
func (c *comparer) top(name string) spec.Pos {
	if p, ok := c.cur.Fields[name]; ok {
		return p
	}
	return spec.Pos{File: c.cur.File, Line: 1, Col: 1}
}

func noun(o *spec.Object) string {
	if k := spec.KindOf(o.Section); k != nil {
		return k.Noun
	}
	return "object"
}

func what(o *spec.Object) string { return noun(o) + " " + o.Name }

func (c *comparer) compare() {
	if c.old.Namespace != c.cur.Namespace {
		c.add(c.top("namespace"), Breaking, fmt.Sprintf("every key moves: keep namespace: %s, or deploy the change with all old replicas stopped", c.old.Namespace),
			"namespace changed from %s to %s at %s", c.old.Namespace, c.cur.Namespace, c.base)
	}
	curByID := map[string]spec.Obj{}
	for _, o := range c.cur.Objects() {
		curByID[o.Common().Identity()] = o
	}
	oldIDs := map[string]bool{}
	for _, o := range c.old.Objects() {
		oldIDs[o.Common().Identity()] = true
	}
	for _, old := range c.old.Objects() {
		if cur, ok := curByID[old.Common().Identity()]; ok {
			c.object(old, cur)
			continue
		}
		c.gone(old, curByID, oldIDs)
	}
}

// gone reports an old object whose identity the new spec lacks: renamed
// when a new object of its section has the same key, else removed.
func (c *comparer) gone(old spec.Obj, curByID map[string]spec.Obj, oldIDs map[string]bool) {
	o := old.Common()
	for _, x := range c.cur.Objects() {
		n := x.Common()
		if n.Section != o.Section || oldIDs[n.Identity()] || !sameKey(o.Key, n.Key) {
			continue
		}
		c.add(n.Pos, Breaking, fmt.Sprintf("add id: %s to %s to keep its keys", o.Identity(), n.Name),
			"%s was renamed from %s (line %d at %s): its keys move from {%s:…} to {%s:…}, so %s",
			what(n), o.Name, o.Pos.Line, c.base, o.Identity(), n.Identity(), moved(n))
		c.object(old, x) // and what else changed
		return
	}
	pos := c.top(o.Section)
	c.add(pos, Breaking, "keep it until no running code uses it, then remove it with -allow-breaking",
		"%s (line %d at %s) was removed; replicas still running the old code use its keys", what(o), o.Pos.Line, c.base)
}

// moved says what moving o's keys does during a rolling deploy (its
// kind's Moved).
func moved(o *spec.Object) string {
	if k := spec.KindOf(o.Section); k != nil && k.Moved != "" {
		return k.Moved
	}
	return "old and new replicas exclude nobody"
}

// sameKey reports whether two keys have the same literals and param
// types, in order.
func sameKey(a, b spec.Key) bool {
	if !slices.Equal(a.Literals, b.Literals) || len(a.Params) != len(b.Params) {
		return false
	}
	for i := range a.Params {
		if a.Params[i].Type.String() != b.Params[i].Type.String() {
			return false
		}
	}
	return true
}

// object compares an object with the one of the same identity.
func (c *comparer) object(old, cur spec.Obj) {
	o, n := old.Common(), cur.Common()
	if o.Section != n.Section {
		c.add(n.Pos, Breaking, "give the new object another name or id, and remove the old one once no code uses it",
			"%s was a %s %s at %s: its keys hold another kind of data now", what(n), noun(o), o.Name, c.base)
		return
	}
	c.key(o, n)
	kind := spec.KindOf(n.Section)
	ov, nv := spec.Values(old), spec.Values(cur)
	names := make([]string, 0, len(nv))
	for name := range nv {
		names = append(names, name)
	}
	slices.Sort(names)
	shown := map[string]bool{}
	for _, name := range names {
		field, _, _ := strings.Cut(name, ".")
		if ov[name] == nv[name] || field == "payload" {
			continue
		}
		if _, had := ov[name]; !had || nv[field] == "none" {
			// A nested mapping given where there was none, or the
			// reverse: one finding for the field, not one per subfield.
			if shown[field] {
				continue
			}
			shown[field] = true
			name = field
			ov, nv = withNested(ov, field), withNested(nv, field)
			if ov[name] == nv[name] {
				continue
			}
		}
		f, _ := kind.Field(field)
		switch f.Change {
		case spec.Breaking:
			c.add(n.FieldPos(field), Breaking, "old and new replicas would read the same keys differently: deploy it under a new name or id, then remove the old object",
				"%s: %s changed from %s to %s", what(n), name, ov[name], nv[name])
		case spec.Behaviour:
			c.add(n.FieldPos(field), Warning, "during a rolling deploy old and new replicas use different values",
				"%s: %s changed from %s to %s", what(n), name, ov[name], nv[name])
		}
	}
	if oq, ok := old.(*spec.Queue); ok {
		c.payload(oq, cur.(*spec.Queue))
	}
}

// nestedValue returns a field's value as a whole: its own ("none" for a
// mapping not given), or its subfields' as "{a: 1, b: 2}".
func nestedValue(vals map[string]string, field string) string {
	if v, ok := vals[field]; ok {
		return v
	}
	var parts []string
	for k, v := range vals {
		if sub, ok := strings.CutPrefix(k, field+"."); ok {
			parts = append(parts, sub+": "+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

// withNested returns vals (a copy) with field's value as a whole
// (nestedValue).
func withNested(vals map[string]string, field string) map[string]string {
	out := make(map[string]string, len(vals)+1)
	for k, v := range vals {
		out[k] = v
	}
	out[field] = nestedValue(vals, field)
	return out
}

// key compares the key patterns and params of an object.
func (c *comparer) key(o, n *spec.Object) {
	hint := fmt.Sprintf("the keys of %s move, so old and new replicas exclude nobody: deploy it as a new object and remove the old one later", n.Name)
	if !slices.Equal(o.Key.Literals, n.Key.Literals) || len(o.Key.Params) != len(n.Key.Params) {
		c.add(n.Key.Pos, Breaking, hint, "%s: key pattern changed from %q to %q", what(n), o.Key.Pattern, n.Key.Pattern)
		return
	}
	oldNames, newNames := paramNames(o.Key), paramNames(n.Key)
	sameSet := slices.Equal(slices.Sorted(slices.Values(oldNames)), slices.Sorted(slices.Values(newNames)))
	if sameSet && !slices.Equal(oldNames, newNames) {
		c.add(n.Key.Pos, Breaking, "callers now pass the values in another order, so the same call builds another key",
			"%s: param order changed from (%s) to (%s)", what(n), strings.Join(oldNames, ", "), strings.Join(newNames, ", "))
		return
	}
	for i, op := range o.Key.Params {
		np := n.Key.Params[i]
		if op.Type.String() != np.Type.String() {
			c.add(np.Pos, Breaking, "the same value may encode to another key, and callers must change",
				"%s: param %s changed type from %s to %s", what(n), np.Name, op.Type, np.Type)
		}
	}
}

func paramNames(k spec.Key) []string {
	names := make([]string, len(k.Params))
	for i, p := range k.Params {
		names[i] = p.Name
	}
	return names
}

// payload compares the payload types of a queue.
func (c *comparer) payload(o, n *spec.Queue) {
	on, nn := o.Payload.String(), n.Payload.String()
	oldShape, haveOld := c.payloads.Old[on]
	curShape, haveCur := c.payloads.Cur[nn]
	const hint = "items already queued by old code would not decode: add a new queue for the new type and drain the old one"
	if haveOld && haveCur {
		if bad := gotypes.Incompatible(oldShape, curShape); len(bad) > 0 {
			c.add(n.PayloadPos, Breaking, hint, "queue %s: payload %s is incompatible with %s at %s: %s", n.Name, nn, on, c.base, strings.Join(bad, "; "))
			return
		}
		if on != nn {
			c.add(n.PayloadPos, Warning, "its encoded fields are compatible; make sure its meaning is the same",
				"queue %s: payload type changed from %s to %s", n.Name, on, nn)
		}
		return
	}
	if on != nn {
		c.add(n.PayloadPos, Breaking, hint, "queue %s: payload type changed from %s to %s", n.Name, on, nn)
	}
}

// Annotation formats f as a GitHub Actions workflow command, which shows
// it on the pull request's diff next to the line: "::error
// file=F,line=L,col=C::message (hint)". file is the spec's path from the
// repository's root.
func Annotation(f Finding, file string) string {
	msg := f.Msg
	if f.Hint != "" {
		msg += " (" + f.Hint + ")"
	}
	return fmt.Sprintf("::%s file=%s,line=%d,col=%d::%s", f.Severity, escapeProperty(file), f.Pos.Line, f.Pos.Col, escapeData(msg))
}

// escapeData and escapeProperty escape as the Actions toolkit does.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
