// Package specset handles several specs at once: finding every spec
// under go-style package patterns ("./..."), objects of different specs
// whose keys would collide, and a spec whose package clause differs from
// the Go files already in its directory.
package specset

import (
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
		root, walk := strings.CutSuffix(filepath.ToSlash(pat), "/...")
		if pat == "..." {
			root, walk = ".", true
		}
		root = filepath.FromSlash(root)
		if root == "" {
			root = "."
		}
		if !walk {
			path := filepath.Join(root, FileName)
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("pattern %s: no %s in %s", pat, FileName, root)
			}
			out = append(out, path)
			continue
		}
		n := len(out)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				name := d.Name()
				if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					return filepath.SkipDir
				}
				if path != root {
					if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
						return filepath.SkipDir
					}
				}
				return nil
			}
			if d.Name() == FileName {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("pattern %s: %w", pat, err)
		}
		if len(out) == n {
			return nil, fmt.Errorf("pattern %s: no %s found", pat, FileName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Collisions reports objects of different specs whose keys would collide:
// the same namespace and the same identity (id, or name) put them on the
// same keys. (Namespaces cannot contain ':' or '{', so keys of different
// namespaces or identities never overlap; within one spec, Parse already
// requires unique identities.) Each collision is reported at the later
// spec's object, naming the position of the other.
func Collisions(specs []*spec.Spec) spec.Diagnostics {
	type first struct {
		s *spec.Spec
		o *spec.Object
	}
	seen := map[string]first{}
	var ds spec.Diagnostics
	for _, s := range specs {
		for _, x := range s.Objects() {
			o := x.Common()
			key := s.Namespace + ":{" + o.Identity()
			f, dup := seen[key]
			if !dup {
				seen[key] = first{s, o}
				continue
			}
			ds = append(ds, spec.Diagnostic{
				Pos:  o.Pos,
				Msg:  fmt.Sprintf("%s shares its keys %s:{%s:…} with %s at %s", describe(o), s.Namespace, o.Identity(), describe(f.o), f.o.Pos),
				Hint: "give one of the specs another namespace, or one of the objects another name or id",
			})
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
