package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestManualLengths holds the two documents every user reads to issue 26's
// bounds: README.md (what lockgen is, the commands, a quickstart, links to
// the manuals) under 350 lines, and the runtime's package doc (contracts,
// errors and round trips; dated measurements live in
// scripts/bench/README.md) under 300. Both had outgrown them once, by
// merges that each added a paragraph; what does not fit goes to docs/.
func TestManualLengths(t *testing.T) {
	for _, c := range []struct {
		path string
		max  int
	}{
		{"README.md", 350},
		{"runtime/doc.go", 300},
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", c.path))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(data, []byte("\n")); n >= c.max {
			t.Errorf("%s is %d lines, want fewer than %d: move details to docs/ (design.md, operations.md, spec.md)", c.path, n, c.max)
		}
	}
}
