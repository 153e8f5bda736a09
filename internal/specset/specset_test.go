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
