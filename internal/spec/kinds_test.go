package spec

import (
	"reflect"
	"strings"
	"testing"
)

// TestKindTable checks every row of Kinds against the model: its Spec
// field holds pointers to a type embedding Object, and every field of the
// row other than those of every object has a `spec:` tag there, so that
// Values (and so lockgen check -base) sees it.
func TestKindTable(t *testing.T) {
	specType := reflect.TypeOf(Spec{})
	objType := reflect.TypeOf((*Obj)(nil)).Elem()
	// Every Spec field of objects has its row, each once, and the rows'
	// Orders are distinct: a kind's file registered itself.
	rows := map[string]int{}
	for i, k := range Kinds {
		rows[k.SpecField]++
		if i > 0 && Kinds[i-1].Order >= k.Order {
			t.Errorf("%s: Order %d after %s's %d", k.Section, k.Order, Kinds[i-1].Section, Kinds[i-1].Order)
		}
	}
	for i := range specType.NumField() {
		f := specType.Field(i)
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Implements(objType) && rows[f.Name] != 1 {
			t.Errorf("Spec.%s has %d rows in Kinds, want 1", f.Name, rows[f.Name])
		}
	}
	for _, k := range Kinds {
		f, ok := specType.FieldByName(k.SpecField)
		if !ok || f.Type.Kind() != reflect.Slice || !f.Type.Elem().Implements(objType) {
			t.Errorf("%s: Spec.%s is not a slice of objects", k.Section, k.SpecField)
			continue
		}
		if k.parse == nil || k.Noun == "" || k.Example == "" {
			t.Errorf("%s: row incomplete", k.Section)
		}
		if !strings.HasPrefix(k.Example, strings.ToUpper(k.Example[:1])) {
			t.Errorf("%s: example %q does not start with a name", k.Section, k.Example)
		}
		zero := reflect.New(f.Type.Elem().Elem()).Interface().(Obj)
		values := Values(zero)
		for _, fl := range k.Fields[len(common):] {
			if _, ok := values[fl.Name]; ok {
				continue
			}
			if _, ok := values[fl.Name+"."+k.Extra[fl.Name][0]]; ok && len(k.Extra[fl.Name]) > 0 {
				continue
			}
			// A nil nested mapping shows as its own name.
			t.Errorf("%s: field %s has no spec:%q tag in %s", k.Section, fl.Name, fl.Name, f.Type.Elem().Elem().Name())
		}
		// Parse a minimal object of the kind from its example.
		src := "version: 1\npackage: p\nnamespace: n\n" + k.Section + ":\n  " + k.Example + "\n"
		s, err := Parse("x.yaml", []byte(src))
		if err != nil {
			t.Errorf("%s: example does not parse: %v", k.Section, err)
			continue
		}
		if got := k.Objects(s); len(got) != 1 || got[0].Common().Section != k.Section {
			t.Errorf("%s: example gave objects %v", k.Section, got)
		}
	}
}
