// Package gotypes looks up the Go types a spec names: the named types of
// key params and the payload types of queues, resolved with golang.org/x/tools/go/packages from the spec's
// directory, so that they resolve exactly as they will when the generated
// code is built.
package gotypes

import (
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/packages"

	"github.com/lockgen/lockgen/internal/suggest"
)

// Type names a Go type declared at package level.
type Type struct {
	ImportPath string
	Name       string
}

func (t Type) String() string { return t.ImportPath + "." + t.Name }

// Result is what Resolve learned about one type.
type Result struct {
	// Basic is the name of the type's underlying basic type ("int64",
	// "string", ...) when Err is nil.
	Basic string
	// Package is the name of the type's package, for importing it.
	Package string
	// Err says why the type cannot be used as a key param; its text is a
	// one-line message meant for a diagnostic.
	Err error
	// Hint says how to fix Err, in one line; it may be empty.
	Hint string
	// ProtoMessage reports, for a payload, whether a pointer to it
	// implements proto.Message (it has a ProtoReflect method), as the
	// protobuf codec needs.
	ProtoMessage bool
}

// keyParamKinds are the underlying types a key param may have.
var keyParamKinds = map[types.BasicKind]bool{
	types.Int: true, types.Int8: true, types.Int16: true, types.Int32: true, types.Int64: true,
	types.Uint: true, types.Uint8: true, types.Uint16: true, types.Uint32: true, types.Uint64: true,
	types.String: true,
}

// ResolveKeyParams resolves types as key param types, loading every
// package they need with one go/packages query run in dir. A type that is
// missing, unexported, generic, or whose underlying type is not an integer
// or string type gets a Result with Err set. The error is for failures to
// run the query at all.
func ResolveKeyParams(dir string, ts []Type) (map[Type]Result, error) {
	r, err := Resolve(dir, Query{KeyParams: ts})
	return r.KeyParams, err
}

// Query is what Resolve looks up.
type Query struct {
	KeyParams []Type // named types of key params
	Payloads  []Type // payload types of queues
}

// Results are Resolve's answers, one per type of the query.
type Results struct {
	KeyParams map[Type]Result
	Payloads  map[Type]Result
}

// Resolve resolves key param types (as ResolveKeyParams does) and queue
// payload types, loading every package they need with one go/packages
// query run in dir. A payload type may be any exported, non-generic type
// that is not a pointer, interface, channel or function type; otherwise
// its Result has Err set. The error is for failures to run the query at
// all.
func Resolve(dir string, q Query) (Results, error) {
	r := Results{KeyParams: make(map[Type]Result, len(q.KeyParams)), Payloads: make(map[Type]Result, len(q.Payloads))}
	var paths []string
	seen := map[string]bool{}
	for _, t := range append(slices.Clip(q.KeyParams), q.Payloads...) {
		if !seen[t.ImportPath] {
			seen[t.ImportPath] = true
			paths = append(paths, t.ImportPath)
		}
	}
	if len(paths) == 0 {
		return r, nil
	}
	sort.Strings(paths)

	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes,
		Dir:  dir,
	}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		return Results{}, fmt.Errorf("gotypes: loading %s: %w", strings.Join(paths, ", "), err)
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		byPath[p.PkgPath] = p
		if p.PkgPath == "" {
			byPath[p.ID] = p
		}
	}
	for _, t := range q.KeyParams {
		r.KeyParams[t] = lookup(byPath[t.ImportPath], t)
	}
	for _, t := range q.Payloads {
		r.Payloads[t] = lookupPayload(byPath[t.ImportPath], t)
	}
	return r, nil
}

// find looks t up in p as the type of a noun ("param", "payload"), or
// returns why it cannot be used.
func find(p *packages.Package, t Type, noun string) (*types.TypeName, Result) {
	importHint := "named " + noun + " types are resolved from the spec's directory, as the go command there resolves imports"
	fail := func(hint, format string, args ...any) (*types.TypeName, Result) {
		return nil, Result{Err: fmt.Errorf(format, args...), Hint: hint}
	}
	if p == nil {
		return fail(importHint, "package %q not found", t.ImportPath)
	}
	var obj types.Object
	if p.Types != nil {
		obj = p.Types.Scope().Lookup(t.Name)
	}
	if obj == nil {
		// Errors matter only when the type could not be found: a package
		// that does not build is type-checked from source, and the build
		// of the generated code will report its errors anyway.
		if len(p.Errors) > 0 {
			return fail(importHint, "cannot load package %q: %s", t.ImportPath, firstLine(p.Errors[0].Msg))
		}
		hint := ""
		if p.Types != nil {
			var names []string
			for _, name := range p.Types.Scope().Names() {
				if _, ok := p.Types.Scope().Lookup(name).(*types.TypeName); ok && token.IsExported(name) {
					names = append(names, name)
				}
			}
			if s := suggest.Closest(t.Name, names); s != "" {
				hint = fmt.Sprintf("did you mean %s.%s?", t.ImportPath, s)
			}
		}
		return fail(hint, "package %q has no type %s", t.ImportPath, t.Name)
	}
	tn, ok := obj.(*types.TypeName)
	if !ok {
		return fail("", "%s is not a type", t)
	}
	if !token.IsExported(t.Name) {
		return fail("", "type %s is not exported", t)
	}
	if named, ok := types.Unalias(tn.Type()).(*types.Named); ok && named.TypeParams().Len() > 0 {
		return fail("declare a non-generic type for the "+noun+", e.g. type ID Generic[int]", "type %s is generic", t)
	}
	return tn, Result{}
}

func lookup(p *packages.Package, t Type) Result {
	tn, r := find(p, t, "param")
	if tn == nil {
		return r
	}
	basic, ok := tn.Type().Underlying().(*types.Basic)
	if !ok || !keyParamKinds[basic.Kind()] {
		return Result{
			Err:  fmt.Errorf("type %s has underlying type %s, not an integer or string type", t, tn.Type().Underlying()),
			Hint: "a key param is an integer or a string, or of a named type whose underlying type is one",
		}
	}
	return Result{Basic: basic.Name(), Package: tn.Pkg().Name()}
}

// lookupPayload resolves t as a queue payload: a value the codec encodes.
func lookupPayload(p *packages.Package, t Type) Result {
	tn, r := find(p, t, "payload")
	if tn == nil {
		return r
	}
	what := ""
	switch u := tn.Type().Underlying().(type) {
	case *types.Pointer:
		what = "a pointer"
	case *types.Interface:
		what = "an interface"
	case *types.Chan:
		what = "a channel"
	case *types.Signature:
		what = "a function"
	case *types.Basic:
		if u.Kind() == types.UnsafePointer {
			what = "an unsafe pointer"
		}
	}
	if what != "" {
		return Result{
			Err:  fmt.Errorf("type %s is %s type, not a value a codec can encode", t, what),
			Hint: "a payload is a value such as a struct, sent by value",
		}
	}
	proto := types.NewMethodSet(types.NewPointer(tn.Type())).Lookup(nil, "ProtoReflect") != nil
	return Result{Package: tn.Pkg().Name(), ProtoMessage: proto}
}

// firstLine returns the first line of a go command's error, for a
// one-line diagnostic. When that line ends in ':', the indented lines
// after it are what it introduces, and are joined to it: "…; to add
// it:\n\tgo get example.com/x" becomes "…; to add it: go get
// example.com/x".
func firstLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	out := strings.TrimSpace(lines[0])
	if !strings.HasSuffix(out, ":") {
		return out
	}
	var more []string
	for _, l := range lines[1:] {
		if l == "" || (l[0] != '\t' && l[0] != ' ') {
			break
		}
		more = append(more, strings.TrimSpace(l))
	}
	if len(more) > 0 {
		out += " " + strings.Join(more, "; ")
	}
	return out
}

// ImportPath returns the import path of the Go package in dir, found from
// the enclosing module's go.mod, or "" when dir is not inside a module.
// Unlike a go/packages query it needs no Go files in dir and builds
// nothing.
func ImportPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	var rel []string
	for d := abs; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			mod := modfile.ModulePath(data)
			if mod == "" {
				return "", fmt.Errorf("gotypes: %s has no module line", filepath.Join(d, "go.mod"))
			}
			for i, j := 0, len(rel)-1; i < j; i, j = i+1, j-1 {
				rel[i], rel[j] = rel[j], rel[i]
			}
			return path.Join(append([]string{mod}, rel...)...), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", nil
		}
		rel = append(rel, filepath.Base(d))
		d = parent
	}
}
