package spec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks Parse never panics and returns either a Spec or
// non-empty Diagnostics whose positions are all at least 1:1.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		files, _ := filepath.Glob(filepath.Join(specsDir, dir, "*.yaml"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("f.yaml", data)
		if err == nil {
			if s == nil {
				t.Fatal("nil Spec and nil error")
			}
			return
		}
		if s != nil {
			t.Fatal("Spec with an error")
		}
		var ds Diagnostics
		if !errors.As(err, &ds) || len(ds) == 0 {
			t.Fatalf("error %T %v, want non-empty Diagnostics", err, err)
		}
		for _, d := range ds {
			if d.Pos.Line < 1 || d.Pos.Col < 1 || d.Pos.File != "f.yaml" {
				t.Fatalf("diagnostic %q has position %+v", d, d.Pos)
			}
		}
	})
}
