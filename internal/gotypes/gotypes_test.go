package gotypes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestResolveKeyParams(t *testing.T) {
	ok := map[Type]string{
		{"time", "Duration"}: "int64",
		{"time", "Month"}:    "int",
		{"os", "FileMode"}:   "uint32", // an alias of io/fs.FileMode
	}
	bad := map[Type]string{
		{"time", "Location"}:            "has underlying type struct",
		{"strings", "NewReader"}:        "is not a type",
		{"time", "NoSuchType"}:          `package "time" has no type NoSuchType`,
		{"nosuchpkg/nope", "X"}:         `cannot load package "nosuchpkg/nope"`,
		{"sync/atomic", "Pointer"}:      "is generic",
		{"go/token", "Pos"}:             "", // int: fine
		{"encoding/json", "RawMessage"}: "has underlying type []byte",
	}
	var ts []Type
	for typ := range ok {
		ts = append(ts, typ)
	}
	for typ := range bad {
		ts = append(ts, typ)
	}
	results, err := ResolveKeyParams(".", ts)
	if err != nil {
		t.Fatal(err)
	}
	for typ, want := range ok {
		if r := results[typ]; r.Err != nil || r.Basic != want {
			t.Errorf("%s: got %+v, want underlying %s", typ, r, want)
		}
	}
	for typ, want := range bad {
		r := results[typ]
		switch {
		case want == "" && r.Err != nil:
			t.Errorf("%s: %v", typ, r.Err)
		case want != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), want)):
			t.Errorf("%s: error %v, want one containing %q", typ, r.Err, want)
		}
	}
	// Code names an alias by the package that declares the alias.
	if r := results[Type{"os", "FileMode"}]; r.Package != "os" {
		t.Errorf("os.FileMode's package is %q, want os", r.Package)
	}
}

func TestResolveNothing(t *testing.T) {
	results, err := ResolveKeyParams("/nonexistent", nil)
	if err != nil || len(results) != 0 {
		t.Fatalf("got %v, %v; want no results and no query", results, err)
	}
}

func TestImportPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]string{dir: "example.com/m", sub: "example.com/m/a/b"} {
		got, err := ImportPath(d)
		if err != nil || got != want {
			t.Errorf("ImportPath(%s) = %q, %v; want %q", d, got, err, want)
		}
	}
}

func TestResolvePayloads(t *testing.T) {
	ok := []Type{{"time", "Time"}, {"encoding/json", "RawMessage"}, {"net/netip", "Addr"}, {"time", "Month"}}
	bad := map[Type]string{
		{"io", "Reader"}:            "is an interface type",
		{"net/http", "HandlerFunc"}: "is a function type",
		{"time", "NoSuchType"}:      `package "time" has no type NoSuchType`,
		{"nosuchpkg/nope", "X"}:     `cannot load package "nosuchpkg/nope"`,
		{"sync/atomic", "Pointer"}:  "is generic",
	}
	payloads := slices.Clone(ok)
	for typ := range bad {
		payloads = append(payloads, typ)
	}
	// Key params and payloads in one query; a type may be both.
	r, err := Resolve(".", Query{KeyParams: []Type{{"time", "Month"}}, Payloads: payloads})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.KeyParams[Type{"time", "Month"}]; p.Err != nil || p.Basic != "int" {
		t.Errorf("key param time.Month: %+v", p)
	}
	for _, typ := range ok {
		if p := r.Payloads[typ]; p.Err != nil || p.Package == "" {
			t.Errorf("payload %s: %+v", typ, p)
		}
	}
	for typ, want := range bad {
		if p := r.Payloads[typ]; p.Err == nil || !strings.Contains(p.Err.Error(), want) {
			t.Errorf("payload %s: error %v, want one containing %q", typ, p.Err, want)
		}
	}
}

// TestNotRequiredHint resolves a payload from a package its module does
// not require: the go command's hint after "to add it:" is kept, on the
// same line.
func TestNotRequiredHint(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFLAGS", "") // the default -mod=readonly, as a user runs it
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOWORK", "off")
	typ := Type{"example.com/other/orders", "CloseRequest"}
	r, err := Resolve(dir, Query{Payloads: []Type{typ}})
	if err != nil {
		t.Fatal(err)
	}
	want := `cannot load package "example.com/other/orders": no required module provides package example.com/other/orders; to add it: go get example.com/other/orders`
	if p := r.Payloads[typ]; p.Err == nil || p.Err.Error() != want {
		t.Errorf("error %v\nwant  %s", p.Err, want)
	}
}

func TestFirstLine(t *testing.T) {
	for in, want := range map[string]string{
		"one line":                           "one line",
		"first\nsecond":                      "first",
		"x; to add it:\n\tgo get a/b\n":      "x; to add it: go get a/b",
		"x:\n\tcmd one\n\tcmd two\nnot this": "x: cmd one; cmd two",
		"ends with colon:\nnot indented":     "ends with colon:",
	} {
		if got := firstLine(in); got != want {
			t.Errorf("firstLine(%q) = %q, want %q", in, got, want)
		}
	}
}
