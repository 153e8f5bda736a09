// Package gotypes looks up the Go types a spec names: the named types of
// key params, resolved with golang.org/x/tools/go/packages from the spec's
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
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/packages"
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
	results := make(map[Type]Result, len(ts))
	if len(ts) == 0 {
		return results, nil
	}
	var paths []string
	seen := map[string]bool{}
	for _, t := range ts {
		if !seen[t.ImportPath] {
			seen[t.ImportPath] = true
			paths = append(paths, t.ImportPath)
		}
	}
	sort.Strings(paths)

	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes,
		Dir:  dir,
	}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		return nil, fmt.Errorf("gotypes: loading %s: %w", strings.Join(paths, ", "), err)
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		byPath[p.PkgPath] = p
		if p.PkgPath == "" {
			byPath[p.ID] = p
		}
	}
	for _, t := range ts {
		results[t] = lookup(byPath[t.ImportPath], t)
	}
	return results, nil
}

func lookup(p *packages.Package, t Type) Result {
	fail := func(hint, format string, args ...any) Result {
		return Result{Err: fmt.Errorf(format, args...), Hint: hint}
	}
	const importHint = "named param types are resolved from the spec's directory, as the go command there resolves imports"
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
		return fail("", "package %q has no type %s", t.ImportPath, t.Name)
	}
	tn, ok := obj.(*types.TypeName)
	if !ok {
		return fail("", "%s is not a type", t)
	}
	if !token.IsExported(t.Name) {
		return fail("", "type %s is not exported", t)
	}
	if named, ok := types.Unalias(tn.Type()).(*types.Named); ok && named.TypeParams().Len() > 0 {
		return fail("declare a non-generic type for the param, e.g. type ID Generic[int]", "type %s is generic", t)
	}
	basic, ok := tn.Type().Underlying().(*types.Basic)
	if !ok || !keyParamKinds[basic.Kind()] {
		return fail("a key param is an integer or a string, or of a named type whose underlying type is one", "type %s has underlying type %s, not an integer or string type", t, tn.Type().Underlying())
	}
	return Result{Basic: basic.Name(), Package: tn.Pkg().Name()}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
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
