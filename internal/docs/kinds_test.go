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

// kindSwitch is a shape of code that switches on an object's kind, with
// a line of that shape (each pattern must match its sample, so that a
// pattern that can no longer fail is caught).
type kindSwitch struct {
	re     *regexp.Regexp
	js     bool // only in the dashboard's script (.js), not in Go
	sample string
}

// kindSwitches are the shapes TestKindSwitchesListed looks for.
var kindSwitches = []kindSwitch{
	// A case or comparison on inspect's Kind constants, or an object
	// made per kind with one.
	{re: regexp.MustCompile(`(case|==|!=).*\bKind(Semaphore|Latch|Limiter|Queue)\b`), sample: `		case inspect.KindSemaphore:`},
	{re: regexp.MustCompile(`\bkind: Kind(Semaphore|Latch|Limiter|Queue)\b`), sample: `		add(&object{kind: KindLatch, latch: x}, x.Object)`},
	// A case on which object or state an inspect entry holds.
	{re: regexp.MustCompile(`case \w+\.(lock|sem|latch|lim|queue) != nil`), sample: `	case o.lim != nil:`},
	{re: regexp.MustCompile(`case \w+\.(Lock|Semaphore|Latch|Limiter|Queue) != nil`), sample: `		case inst.Lock != nil:`},
	// A type switch case on the spec's object types.
	{re: regexp.MustCompile(`case \*spec\.(Lock|Semaphore|Latch|Limiter|Queue)\b`), sample: `	case *spec.Queue:`},
	// A case on a section's name or a kind's word, in Go or the script.
	{re: regexp.MustCompile(`case "(locks|semaphores|latches|limiters|queues|semaphore|latch|limiter|queue|reentrant|fair|readwrite|fenced|simple|redlock)"`), sample: `    case "semaphore": parts.push(x); break;`},
	// The dashboard's script: a switch or test on an object's kind, or a
	// branch on which state an instance holds.
	{re: regexp.MustCompile(`switch \(\w+\.kind\)`), js: true, sample: `  switch (o.kind) {`},
	{re: regexp.MustCompile(`\.kind\s*[!=]==?`), js: true, sample: `  if (o.kind === "queue") return x;`},
	{re: regexp.MustCompile(`\binst\.(lock|semaphore|latch|limiter|queue)\b`), js: true, sample: `  if (inst.semaphore) return s;`},
}

// TestKindSwitchesListed finds every place outside tests (and outside
// scripts/) that switches on an object's kind — the shapes of
// kindSwitches: a case or comparison on inspect's Kind constants, a case
// on which object or state an inspect entry holds, a type switch case on
// the spec's object types, a case on a section's name, the dashboard
// script's tests of o.kind or of an instance's state — and fails unless
// its file is in CONTRIBUTING.md's table "Adding a kind of object": a new
// kind must touch every one. Since each kind has its own file in inspect
// and the dashboard renders every kind alike, it finds none; each shape
// is checked against a sample, so that the test can still fail.
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
	// Only the table's rows list files: the prose around it may name
	// files a new kind does not touch.
	var rows []string
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
		}
	}
	table = strings.Join(rows, "\n")
	for _, sw := range kindSwitches {
		if !sw.re.MatchString(sw.sample) {
			t.Errorf("pattern %s does not match its sample %q: it could not fail", sw.re, sw.sample)
		}
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
		js := strings.HasSuffix(path, ".js")
		for _, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			if slices.ContainsFunc(kindSwitches, func(sw kindSwitch) bool { return (js || !sw.js) && sw.re.MatchString(line) }) {
				found[filepath.ToSlash(rel)] = true
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range found {
		if !strings.Contains(table, "`"+f+"`") {
			t.Errorf("%s switches on an object's kind but is not in CONTRIBUTING.md's table \"Adding a kind of object\"", f)
		}
	}
}
