// Package specset handles several specs at once: finding every spec
// under go-style package patterns ("./..."), objects of different specs
// whose keys would collide, and a spec whose package clause differs from
// the Go files already in its directory.
package specset

import (
	"bytes"
	"fmt"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockgen/lockgen/internal/spec"
)

// FileName is the name of the spec files Find looks for.
const FileName = "lockgen.yaml"

// Find returns the spec files matched by patterns, sorted and without
// duplicates. A pattern is a directory ("./shop", whose lockgen.yaml must
// exist) or a directory followed by "/..." ("./...": every lockgen.yaml
// in it and below). As with the go command, "..." skips testdata,
// vendor, directories whose names start with '.' or '_', and nested
// modules (directories with their own go.mod).
func Find(patterns []string) ([]string, error) {
	var out []string
	for _, pat := range patterns {
		root, below := strings.CutSuffix(filepath.ToSlash(pat), "/...")
		if pat == "..." {
			root, below = ".", true
		}
		root = filepath.FromSlash(root)
		if root == "" {
			root = "."
		}
		if !below {
			path := filepath.Join(root, FileName)
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("pattern %s: no %s in %s", pat, FileName, root)
			}
			out = append(out, path)
			continue
		}
		found, err := walk(root)
		if err != nil {
			return nil, fmt.Errorf("pattern %s: %w", pat, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("pattern %s: no %s found", pat, FileName)
		}
		out = append(out, found...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// walk returns the spec files in root and below, skipping what "./..."
// skips (see Find). It reads each directory once: a nested module is
// seen by the go.mod among its entries, without a stat per directory.
func walk(root string) ([]string, error) {
	var out []string
	var visit func(dir string, top bool) error
	visit = func(dir string, top bool) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if !top && slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() == "go.mod" && !e.IsDir() }) {
			return nil // a nested module
		}
		for _, e := range entries {
			name := e.Name()
			switch {
			case !e.IsDir():
				if name == FileName {
					out = append(out, filepath.Join(dir, name))
				}
			case name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"):
			default:
				if err := visit(filepath.Join(dir, name), false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := visit(root, true)
	slices.Sort(out)
	return out, err
}

// ModuleRoot returns the directory of the go.mod that governs dir (dir
// or the nearest directory above it with a go.mod), or "" when there is
// none.
func ModuleRoot(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if fi, err := os.Stat(filepath.Join(abs, "go.mod")); err == nil && !fi.IsDir() {
			return abs
		}
		up := filepath.Dir(abs)
		if up == abs {
			return ""
		}
		abs = up
	}
}

// Neighbours returns the spec files of the modules of paths (the specs
// "./..." finds from each module's root) that are not among paths, so
// that a run on one spec can check it against the others of its module.
// A module whose named specs are all where "./..." does not look (under
// testdata, say) adds none. The paths returned are relative to the
// working directory when paths are relative, absolute otherwise.
func Neighbours(paths []string) ([]string, error) {
	named := map[string]bool{}
	roots := map[string]bool{} // the modules of the named specs
	relative := false
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		named[abs] = true
		relative = relative || !filepath.IsAbs(p)
		if root := ModuleRoot(filepath.Dir(abs)); root != "" {
			roots[root] = true
		}
	}
	wd, _ := os.Getwd()
	var out []string
	for root := range roots {
		found, err := walk(root)
		if err != nil {
			return nil, fmt.Errorf("finding the specs of module %s: %w", root, err)
		}
		if !slices.ContainsFunc(found, func(f string) bool { return named[f] }) {
			continue // only specs "./..." skips (under testdata, say) are named
		}
		for _, f := range found {
			if named[f] {
				continue
			}
			if relative && wd != "" {
				if rel, err := filepath.Rel(wd, f); err == nil {
					f = rel
				}
			}
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Others returns the other specs of the modules of paths (see
// Neighbours) that may share keys with the named specs: those in one of
// their namespaces. A file that contains none of those namespaces (nor a
// backslash, with which YAML could spell one otherwise) is not parsed,
// and one that does not parse is left out: its own run reports it.
func Others(paths []string, named []*spec.Spec) ([]*spec.Spec, error) {
	if len(named) == 0 {
		return nil, nil
	}
	files, err := Neighbours(paths)
	if err != nil {
		return nil, err
	}
	var out []*spec.Spec
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if !bytes.ContainsRune(data, '\\') && !slices.ContainsFunc(named, func(s *spec.Spec) bool { return bytes.Contains(data, []byte(s.Namespace)) }) {
			continue
		}
		if s, err := spec.Parse(f, data); err == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// Collisions reports objects of different specs whose keys would collide:
// the same namespace and the same identity (id, or name) put them on the
// same keys. (Namespaces cannot contain ':' or '{', so keys of different
// namespaces or identities never overlap; within one spec, Parse already
// requires unique identities.) Each collision is reported at the later
// spec's object, naming the position of the other.
func Collisions(specs []*spec.Spec) spec.Diagnostics {
	return CollisionsWith(specs, nil)
}

// CollisionsWith reports the collisions (see Collisions) of the specs
// named by a run with each other and with others, the other specs of
// their modules (see Neighbours); collisions among others alone are left
// to the runs that name them. A collision is reported at the object of a
// named spec, naming the position of the other object.
func CollisionsWith(named, others []*spec.Spec) spec.Diagnostics {
	type first struct {
		o     *spec.Object
		named bool
	}
	seen := map[string]first{}
	var ds spec.Diagnostics
	report := func(at, other *spec.Object, ns string) {
		ds = append(ds, spec.Diagnostic{
			Pos:  at.Pos,
			Msg:  fmt.Sprintf("%s shares its keys %s:{%s:…} with %s at %s", describe(at), ns, at.Identity(), describe(other), other.Pos),
			Hint: "give one of the specs another namespace, or one of the objects another name or id",
		})
	}
	for i, s := range slices.Concat(named, others) {
		isNamed := i < len(named)
		for _, x := range s.Objects() {
			o := x.Common()
			key := s.Namespace + ":{" + o.Identity()
			f, dup := seen[key]
			switch {
			case !dup:
				seen[key] = first{o, isNamed}
			case isNamed:
				report(o, f.o, s.Namespace)
			case f.named:
				report(f.o, o, s.Namespace)
			}
		}
	}
	ds.Sort()
	return ds
}

func describe(o *spec.Object) string {
	if k := spec.KindOf(o.Section); k != nil {
		return k.Noun + " " + o.Name
	}
	return o.Name
}

// CheckPackage reports a spec whose package differs from the package of
// the Go files already in dir (the spec's directory), not counting test
// files, files the build constraints exclude, and the spec's own
// generated file. It returns nil when they agree or dir has no Go files.
func CheckPackage(s *spec.Spec, dir string) *spec.Diagnostic {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == s.Output {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly)
		if err != nil {
			continue // the build reports it
		}
		if pkg := f.Name.Name; pkg != s.Package {
			pos := s.Fields["package"]
			if pos.Line == 0 {
				pos = spec.Pos{File: s.File, Line: 1, Col: 1}
			}
			return &spec.Diagnostic{
				Pos:  pos,
				Msg:  fmt.Sprintf("package %s differs from package %s of %s in the same directory", s.Package, pkg, name),
				Hint: fmt.Sprintf("write package: %s, or move the spec to a directory of its own", pkg),
			}
		}
	}
	return nil
}
