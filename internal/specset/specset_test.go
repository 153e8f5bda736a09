package specset

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lockgen/lockgen/internal/spec"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		"lockgen.yaml", "a/lockgen.yaml", "a/b/lockgen.yaml", "a/testdata/lockgen.yaml",
		"vendor/x/lockgen.yaml", ".hidden/lockgen.yaml", "_skip/lockgen.yaml",
		"mod/go.mod", "mod/lockgen.yaml", "c/other.yaml",
	} {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Find([]string{dir + "/...", dir + "/a", dir + "/mod/..."})
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range got {
		r, _ := filepath.Rel(dir, p)
		rel = append(rel, filepath.ToSlash(r))
	}
	want := []string{"a/b/lockgen.yaml", "a/lockgen.yaml", "lockgen.yaml", "mod/lockgen.yaml"}
	if !slices.Equal(rel, want) {
		t.Errorf("Find = %v, want %v", rel, want)
	}
	if _, err := Find([]string{dir + "/c"}); err == nil {
		t.Error("Find of a directory without a spec succeeded")
	}
}

func TestCollisions(t *testing.T) {
	parse := func(file, src string) *spec.Spec {
		s, err := spec.Parse(file, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := parse("a.yaml", "version: 1\npackage: a\nnamespace: shop\nlocks:\n  Order: { key: o }\n  Cart: { key: c }\n")
	b := parse("b.yaml", "version: 1\npackage: b\nnamespace: shop\nqueues:\n  Mail: { id: Cart, key: m, payload: string }\n  Order: { key: o, payload: string }\n")
	c := parse("c.yaml", "version: 1\npackage: c\nnamespace: other\nlocks:\n  Order: { key: o }\n")
	ds := Collisions([]*spec.Spec{a, b, c})
	want := []string{
		"b.yaml:5:3: queue Mail shares its keys shop:{Cart:…} with lock Cart at a.yaml:6:3 (give one of the specs another namespace, or one of the objects another name or id)",
		"b.yaml:6:3: queue Order shares its keys shop:{Order:…} with lock Order at a.yaml:5:3 (give one of the specs another namespace, or one of the objects another name or id)",
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}

// TestCollisionsWith: a run naming c finds c's collision with a spec it
// did not name, at c's object; collisions among the others alone are
// left to their own runs.
func TestCollisionsWith(t *testing.T) {
	parse := func(file, src string) *spec.Spec {
		s, err := spec.Parse(file, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := parse("a.yaml", "version: 1\npackage: a\nnamespace: shop\nlocks:\n  Order: { key: o }\n  Cart: { key: c }\n")
	b := parse("b.yaml", "version: 1\npackage: b\nnamespace: shop\nlocks:\n  Cart: { key: c }\n")
	c := parse("c.yaml", "version: 1\npackage: c\nnamespace: shop\nsemaphores:\n  Export: { id: Order, key: x, permits: 1 }\n")
	var got []string
	for _, d := range CollisionsWith([]*spec.Spec{c}, []*spec.Spec{a, b}) {
		got = append(got, d.String())
	}
	want := []string{"c.yaml:5:3: semaphore Export shares its keys shop:{Order:…} with lock Order at a.yaml:5:3 (give one of the specs another namespace, or one of the objects another name or id)"}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}

func TestNeighbours(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		"go.mod", "lockgen.yaml", "a/lockgen.yaml", "a/b/lockgen.yaml", "a/testdata/lockgen.yaml",
		"vendor/x/lockgen.yaml", "mod/go.mod", "mod/lockgen.yaml", "mod/m/lockgen.yaml",
		"testdata/t/lockgen.yaml",
	} {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rel := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			r, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(r))
		}
		return out
	}
	for _, c := range []struct {
		named []string
		want  []string
	}{
		{[]string{"a/b/lockgen.yaml"}, []string{"a/lockgen.yaml", "lockgen.yaml"}},
		{[]string{"a/lockgen.yaml", "lockgen.yaml"}, []string{"a/b/lockgen.yaml"}},
		{[]string{"mod/m/lockgen.yaml"}, []string{"mod/lockgen.yaml"}},
		{[]string{"testdata/t/lockgen.yaml"}, nil}, // a spec ./... skips: no neighbours
	} {
		var named []string
		for _, n := range c.named {
			named = append(named, filepath.Join(dir, n))
		}
		got, err := Neighbours(named)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rel(got), c.want) {
			t.Errorf("Neighbours(%v) = %v, want %v", c.named, rel(got), c.want)
		}
	}
	if root := ModuleRoot(filepath.Join(dir, "a/b")); root != dir {
		t.Errorf("ModuleRoot(a/b) = %s, want %s", root, dir)
	}
}

// TestOthers: only the module's specs in a namespace of the named specs
// are parsed and returned (also one spelling it with a YAML escape);
// those that do not parse are left to their own runs.
func TestOthers(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":           "module m\n",
		"a/lockgen.yaml":   "version: 1\npackage: a\nnamespace: shop\nlocks:\n  Order: { key: o }\n",
		"b/lockgen.yaml":   "version: 1\npackage: b\nnamespace: shop\nlocks:\n  Cart: { key: c }\n",
		"c/lockgen.yaml":   "version: 1\npackage: c\nnamespace: \"\\x73hop\"\nlocks:\n  Mail: { key: m }\n",
		"d/lockgen.yaml":   "version: 1\npackage: d\nnamespace: other\nlocks:\n  Order: { key: o }\n",
		"e/lockgen.yaml":   "version: 1\npackage: e\nnamespace: shop\nlocks:\n  Order: { kind: nope }\n",
		"x/y/lockgen.yaml": "version: 1\npackage: y\nnamespace: shop\nlocks:\n  Y: { key: y }\n",
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := spec.Load(filepath.Join(dir, "a/lockgen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	others, err := Others([]string{a.File}, []*spec.Spec{a})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range others {
		got = append(got, s.Package)
	}
	if want := []string{"b", "c", "y"}; !slices.Equal(got, want) {
		t.Errorf("Others = %v, want %v", got, want)
	}
}
