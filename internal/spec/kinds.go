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
// running deployment. Each kind's row is in the kind's own file (locks.go,
// queues.go, …), with its objects' type and its parse function, and
// registers itself from init. The parser, the unknown-field hints, the
// compatibility check (package evolve) and the schema's generator
// (schema.go) read the table; adding a kind starts with its file (see
// CONTRIBUTING.md).

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
	// Order is the section's place in the table: the order the docs, the
	// schema and the generated code give the sections.
	Order   int
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

// Kinds is the kind table, in Order: each kind's file adds its row
// (register, from init), so it is complete once package spec is
// initialised.
var Kinds []*Kind

// register adds k to Kinds, in Order, and its section and fields to
// isSection and fieldOwner.
func register(k *Kind) {
	i, _ := slices.BinarySearchFunc(Kinds, k.Order, func(x *Kind, order int) int { return x.Order - order })
	Kinds = slices.Insert(Kinds, i, k)
	isSection[k.Section] = true
	owners := map[string][]string{}
	for _, k := range Kinds {
		for _, f := range k.Fields {
			if !isCommon(f.Name) {
				owners[f.Name] = append(owners[f.Name], k.Noun)
			}
		}
	}
	clear(fieldOwner)
	for name, nouns := range owners {
		if len(nouns) == 1 {
			fieldOwner[name] = nouns[0]
		}
	}
}

// isSection holds the section names, and fieldOwner the noun of the only
// kind that has a field (not one every object has, nor lease which
// several kinds have). register sets them from Kinds.
var (
	isSection  = map[string]bool{}
	fieldOwner = map[string]string{}
)

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
