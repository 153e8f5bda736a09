package gotypes

import (
	"fmt"
	"go/types"
	"reflect"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Shape is what an encoder sees of a payload type: for a struct, its
// encoded fields by wire name (the json tag's name, else the Go name; embedded
// structs without a tag are flattened, as encoding/json does); for any
// other type, its underlying type alone.
type Shape struct {
	Type   string            // the type's name, import/path.Name
	Under  string            // the underlying type when it is not a struct
	Fields map[string]string // wire name -> Go type, for structs
}

// Shapes loads each payload type in ts from dir (as Resolve does) and
// returns the shapes of those found; a type that cannot be found is left
// out, with its reason in missing.
func Shapes(dir string, ts []Type) (shapes map[Type]Shape, missing map[Type]string, err error) {
	shapes, missing = map[Type]Shape{}, map[Type]string{}
	var paths []string
	seen := map[string]bool{}
	for _, t := range ts {
		if !seen[t.ImportPath] {
			seen[t.ImportPath] = true
			paths = append(paths, t.ImportPath)
		}
	}
	if len(paths) == 0 {
		return shapes, missing, nil
	}
	sort.Strings(paths)
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: dir}, paths...)
	if err != nil {
		return nil, nil, fmt.Errorf("gotypes: loading %s: %w", strings.Join(paths, ", "), err)
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		byPath[p.PkgPath] = p
	}
	for _, t := range ts {
		tn, r := find(byPath[t.ImportPath], t, "payload")
		if tn == nil {
			missing[t] = r.Err.Error()
			continue
		}
		shapes[t] = shapeOf(t, tn.Type())
	}
	return shapes, missing, nil
}

func shapeOf(t Type, typ types.Type) Shape {
	s := Shape{Type: t.String()}
	st, ok := typ.Underlying().(*types.Struct)
	if !ok {
		s.Under = typeString(typ.Underlying())
		return s
	}
	s.Fields = map[string]string{}
	flatten(st, s.Fields, 0)
	return s
}

// flatten adds the encoded fields of st to out, as encoding/json sees
// them (simplified: a name seen twice keeps its shallowest field).
func flatten(st *types.Struct, out map[string]string, depth int) {
	for i := range st.NumFields() {
		f := st.Field(i)
		name, _, _ := strings.Cut(reflect.StructTag(st.Tag(i)).Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Embedded() && name == "" && depth < 8 {
			ft := f.Type()
			if p, ok := ft.(*types.Pointer); ok {
				ft = p.Elem()
			}
			if inner, ok := ft.Underlying().(*types.Struct); ok {
				flatten(inner, out, depth+1)
				continue
			}
		}
		if !f.Exported() {
			continue
		}
		if name == "" {
			name = f.Name()
		}
		if _, dup := out[name]; !dup {
			out[name] = typeString(f.Type())
		}
	}
}

func typeString(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string { return p.Path() })
}

// Incompatible returns what makes data encoded as old unreadable as cur
// (fields removed or retyped, another underlying type), one line each,
// sorted; none when cur reads everything old wrote. Added fields are
// compatible.
func Incompatible(old, cur Shape) []string {
	var out []string
	switch {
	case old.Fields == nil && cur.Fields == nil:
		if old.Under != cur.Under {
			out = append(out, fmt.Sprintf("underlying type changed from %s to %s", old.Under, cur.Under))
		}
	case old.Fields == nil || cur.Fields == nil:
		out = append(out, fmt.Sprintf("changed from %s to %s", describe(old), describe(cur)))
	default:
		for name, typ := range old.Fields {
			switch now, ok := cur.Fields[name]; {
			case !ok:
				out = append(out, fmt.Sprintf("field %s (%s) removed", name, typ))
			case now != typ:
				out = append(out, fmt.Sprintf("field %s changed type from %s to %s", name, typ, now))
			}
		}
	}
	sort.Strings(out)
	return out
}

func describe(s Shape) string {
	if s.Fields != nil {
		return "a struct"
	}
	return s.Under
}
