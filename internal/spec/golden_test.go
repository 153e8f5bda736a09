package spec

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/specs/invalid")

const specsDir = "../../testdata/specs"

// TestInvalidGolden parses every testdata/specs/invalid/NAME.yaml and
// compares the diagnostics with NAME.golden. The goldens document the
// error messages; review them by eye after go test -update.
func TestInvalidGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(specsDir, "invalid", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 25 {
		t.Fatalf("found %d invalid specs, want at least 25", len(files))
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(name, data)
			if err == nil {
				t.Fatalf("Parse succeeded, want errors")
			}
			if s != nil {
				t.Errorf("Parse returned a Spec with errors")
			}
			var ds Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error is %T, want non-empty Diagnostics", err)
			}
			checkDiagnostics(t, ds)
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", filepath.Base(golden), got, want)
			}
		})
	}
}

// checkDiagnostics checks what every Diagnostics must satisfy: positions
// at least 1:1, sorted, no duplicates, one-line texts.
func checkDiagnostics(t *testing.T, ds Diagnostics) {
	t.Helper()
	for i, d := range ds {
		if d.Pos.Line < 1 || d.Pos.Col < 1 {
			t.Errorf("diagnostic %q has position %d:%d", d, d.Pos.Line, d.Pos.Col)
		}
		if d.Msg == "" || strings.Contains(d.Msg, "\n") || strings.Contains(d.Hint, "\n") {
			t.Errorf("diagnostic %q: empty message or not one line", d)
		}
		if i > 0 {
			prev := ds[i-1]
			if prev == d {
				t.Errorf("diagnostic %q reported twice", d)
			}
			if prev.Pos.Line > d.Pos.Line || prev.Pos.Line == d.Pos.Line && prev.Pos.Col > d.Pos.Col {
				t.Errorf("diagnostics not sorted: %q before %q", prev, d)
			}
		}
	}
}
