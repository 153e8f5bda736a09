package gen

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
	"github.com/lockgen/lockgen/templates"
)

func loadCase(t *testing.T, name string) *spec.Spec {
	t.Helper()
	s, err := spec.Load(filepath.Join(testdataDir, name, "lockgen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDeterministic(t *testing.T) {
	for _, name := range []string{"multilock", "multiparams"} {
		s := loadCase(t, name)
		first, err := Generate(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			again, err := Generate(s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first[0].Content, again[0].Content) {
				t.Fatalf("%s: two runs of Generate differ", name)
			}
		}
	}
}

func TestSourceNamesSpec(t *testing.T) {
	s := loadCase(t, "basic")
	s.File = filepath.Join("some", "dir", "locks.yaml")
	s.Output = "locks.go"
	files, err := Generate(s, Options{Dir: filepath.Join(testdataDir, "basic")})
	if err != nil {
		t.Fatal(err)
	}
	if files[0].Name != "locks.go" {
		t.Errorf("file name %q, want the spec's output locks.go", files[0].Name)
	}
	for _, want := range []string{"// source: locks.yaml\n", "declared in locks.yaml."} {
		if !bytes.Contains(files[0].Content, []byte(want)) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestNoLocks(t *testing.T) {
	s := &spec.Spec{File: "lockgen.yaml", Version: 1, Package: "empty", Namespace: "e", Output: "lockgen.gen.go"}
	files, err := Generate(s, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	src := string(files[0].Content)
	if strings.Contains(src, "Locks") || strings.Contains(src, "Preload") {
		t.Errorf("a spec without locks should give only the version pin:\n%s", src)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0); err != nil {
		t.Fatal(err)
	}
}

func TestScriptDoesNotParse(t *testing.T) {
	broken := map[string]string{
		"good":   "return 1\n",
		"broken": "local x = 1\nif x then\n  return = 2\nend\n",
	}
	source := func(name string) (string, error) { return broken[name], nil }
	_, err := loadScripts([]string{"good", "broken"}, source)
	if err == nil {
		t.Fatal("a script that does not parse was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "templates/broken.lua:3:") {
		t.Errorf("error %q does not name the script and line", msg)
	}

	unfinished := func(string) (string, error) { return "if true then\n", nil }
	if _, err := loadScripts([]string{"eof"}, unfinished); err == nil || !strings.Contains(err.Error(), "templates/eof.lua") {
		t.Errorf("unterminated script: error %v", err)
	}

	missing := func(name string) (string, error) { return "", errors.New("no script " + name) }
	if _, err := loadScripts([]string{"gone"}, missing); err == nil || !strings.Contains(err.Error(), "no script gone") {
		t.Errorf("missing script: error %v", err)
	}
}

func TestScriptNotARawString(t *testing.T) {
	for _, src := range []string{"return `x`", "return 1\r\n", "return '\x00'", "return '\xff'"} {
		if err := CheckScript("bad", src); err == nil {
			t.Errorf("CheckScript accepted %q", src)
		}
	}
}

func TestScriptsCheckAndHash(t *testing.T) {
	scripts, err := loadScripts(templates.Names(), sourceOf)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		if len(s.sha1) != 40 || s.sha1 != ScriptSHA1(s.source) {
			t.Errorf("%s: SHA1 %q", s.name, s.sha1)
		}
	}
	// The SHA1 of the empty string, as Redis computes it.
	if got := ScriptSHA1(""); got != "da39a3ee5e6b4b0d3255bfef95601890afd80709" {
		t.Errorf("ScriptSHA1(\"\") = %s", got)
	}
}

func TestEveryKindHasScripts(t *testing.T) {
	for kind, rk := range defs.LockKinds {
		names := lockimpl.ScriptNames(lockimpl.Scripts().Locks(rk))
		if len(names) < 4 {
			t.Errorf("lock kind %s runs %d scripts %v, want acquire, release, renew and force_unlock", kind, len(names), names)
		}
	}
}

func TestDurationExpr(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{30 * time.Second, "30 * time.Second"},
		{time.Second, "time.Second"},
		{1500 * time.Millisecond, "1500 * time.Millisecond"},
		{2 * time.Minute, "2 * time.Minute"},
		{90 * time.Second, "90 * time.Second"},
		{time.Hour, "time.Hour"},
		{36 * time.Hour, "36 * time.Hour"},
		{1001 * time.Microsecond, "1001 * time.Microsecond"},
		{7, "7 * time.Nanosecond"},
	} {
		if got := strings.ReplaceAll(durationExpr(c.d).GoString(), " ", ""); got != strings.ReplaceAll(c.want, " ", "") {
			t.Errorf("durationExpr(%v) = %s, want %s", c.d, got, c.want)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:        "30s",
		2 * time.Minute:         "2m",
		90 * time.Second:        "1m30s",
		1500 * time.Millisecond: "1.5s",
		250 * time.Millisecond:  "250ms",
		time.Hour + time.Second: "1h1s",
		24 * time.Hour:          "24h",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestLowerCamel(t *testing.T) {
	for in, want := range map[string]string{
		"Order": "order", "OrderClose": "orderClose", "API": "api", "APIKey": "apiKey",
		"HTTPServer": "httpServer", "ID2": "id2", "X": "x", "already": "already",
	} {
		if got := lowerCamel(in); got != want {
			t.Errorf("lowerCamel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDocComment(t *testing.T) {
	for _, c := range []struct{ name, desc, want string }{
		{"Order", "Serialises changes to one order.", "Order serialises changes to one order."},
		{"Order", "serialises changes to one order", "Order serialises changes to one order."},
		{"Order", "Order is taken by the checkout.", "Order is taken by the checkout."},
		{"Export", "API exports of one tenant", "Export API exports of one tenant."},
		{"Order", "  ", "fallback."},
		{"Order", "Is it held?", "Order is it held?"},
	} {
		if got := docComment(c.name, c.desc, "fallback."); got != c.want {
			t.Errorf("docComment(%q, %q) = %q, want %q", c.name, c.desc, got, c.want)
		}
	}
}

func TestDuplicateIdentifiers(t *testing.T) {
	s := loadCase(t, "basic")
	second := *s.Locks[0]
	second.Name = "ORDER"
	s.Locks = append([]*spec.Lock{&second}, s.Locks...)
	files, err := Generate(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := string(files[0].Content)
	for _, want := range []string{"orderKey ", "order2Key ", "func (l *Locks) ORDER(", "func (l *Locks) Order("} {
		if !strings.Contains(src, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestSectionPerKind checks that every row of the kind table has a
// renderer and every renderer a row: a kind added to spec.Kinds without
// one, or a renderer registered under a section the table lacks, fails
// here.
func TestSectionPerKind(t *testing.T) {
	sections := map[string]bool{}
	for _, k := range spec.Kinds {
		sections[k.Section] = true
		if renderers[k.Section] == nil {
			t.Errorf("section %s of spec.Kinds has no renderer (registerSection)", k.Section)
		}
	}
	for name := range renderers {
		if !sections[name] {
			t.Errorf("a renderer is registered for %s, which spec.Kinds lacks", name)
		}
	}
	if t.Failed() {
		return
	}
	if got, want := len(newSections()), len(spec.Kinds); got != want {
		t.Fatalf("%d section renderers for %d kinds in spec.Kinds", got, want)
	}
}

// TestCheckPartialSpecs runs Check on what spec.ParsePartial reads of
// every invalid spec in testdata/specs/invalid: a spec with problems of
// any kind must not make it panic.
func TestCheckPartialSpecs(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/specs/invalid/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no invalid specs: %v", err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, ds := spec.ParsePartial(filepath.Base(path), data)
		if len(ds) == 0 {
			t.Errorf("%s: no diagnostics", path)
		}
		if s != nil {
			_ = Check(s, Options{Dir: t.TempDir()})
		}
	}
}
