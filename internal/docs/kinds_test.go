package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockgen/lockgen/internal/spec"
)

// TestKindFilesTable holds the table "The files of each kind" in
// CONTRIBUTING.md to the kind table and to the tree: one row per section
// of spec.Kinds, in its order; every `path` in a row (a glob) names files
// that exist; every script and included file in templates/ is in a row.
func TestKindFilesTable(t *testing.T) {
	root := "../.."
	b, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## The files of each kind\n")
	if !ok {
		t.Fatal(`CONTRIBUTING.md has no section "The files of each kind"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	path := regexp.MustCompile("`([^`]+)`")
	var sections []string
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.TrimSpace(cells[1]) == "section" || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		sections = append(sections, strings.TrimSpace(cells[1]))
		for _, m := range path.FindAllStringSubmatch(strings.Join(cells[2:], "|"), -1) {
			matches, err := filepath.Glob(filepath.Join(root, m[1]))
			if err != nil || len(matches) == 0 {
				t.Errorf("row %s: %s names no file", cells[1], m[1])
			}
			for _, f := range matches {
				rel, _ := filepath.Rel(root, f)
				listed[filepath.ToSlash(rel)] = true
			}
		}
	}
	var want []string
	for _, k := range spec.Kinds {
		want = append(want, k.Section)
	}
	if !slices.Equal(sections, want) {
		t.Errorf("the table's rows are %v, spec.Kinds has %v", sections, want)
	}
	for _, pattern := range []string{"templates/*.lua", "templates/*.luainc"} {
		files, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, f := range files {
			rel, _ := filepath.Rel(root, f)
			if rel = filepath.ToSlash(rel); !listed[rel] {
				t.Errorf("%s is in no row of the table", rel)
			}
		}
	}
}
