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

// TestKindSwitchesListed finds every place outside tests that switches on
// an object's kind — a case or comparison on inspect's Kind constants, a
// case on which object an inspect entry holds (o.lock, o.sem, ...), a
// type switch case on the spec's object types, the dashboard script's
// switch on o.kind — and fails unless its file is in CONTRIBUTING.md's
// table "Adding a kind of object": a new kind must touch every one.
func TestKindSwitchesListed(t *testing.T) {
	root := "../.."
	b, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Adding a kind of object\n")
	if !ok {
		t.Fatal(`CONTRIBUTING.md has no section "Adding a kind of object"`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	switches := []*regexp.Regexp{
		regexp.MustCompile(`(case|==|!=).*\bKind(Semaphore|Latch|Limiter|Queue)\b`),
		regexp.MustCompile(`\bkind: Kind(Semaphore|Latch|Limiter|Queue)\b`),
		regexp.MustCompile(`case o\.(lock|sem|latch|lim|queue) != nil`),
		regexp.MustCompile(`case \*spec\.(Lock|Semaphore|Latch|Limiter|Queue)\b`),
		regexp.MustCompile(`switch \(o\.kind\)`),
	}
	found := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules":
				return filepath.SkipDir
			}
			if strings.HasPrefix(rel, "scripts") {
				return filepath.SkipDir // benchmarks and harnesses, not the product
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".js")) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			if slices.ContainsFunc(switches, func(re *regexp.Regexp) bool { return re.MatchString(line) }) {
				found[filepath.ToSlash(rel)] = true
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("found no switch on kind: the patterns no longer match the code")
	}
	for f := range found {
		if !strings.Contains(table, "`"+f+"`") {
			t.Errorf("%s switches on an object's kind but is not in CONTRIBUTING.md's table \"Adding a kind of object\"", f)
		}
	}
}
