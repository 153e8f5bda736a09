package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes files (path relative to dir -> content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestModuleWideCollision(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":                "module example.com/m\n\ngo 1.26\n",
		"a/lockgen.yaml":        "version: 1\npackage: a\nnamespace: shop\nlocks:\n  Order: { key: \"order:{id}\", params: { id: int64 } }\n",
		"b/lockgen.yaml":        "version: 1\npackage: b\nnamespace: shop\nsemaphores:\n  Export: { id: Order, key: \"x\", permits: 2 }\n",
		"b/c/lockgen.yaml":      "version: 1\npackage: c\nnamespace: other\nlocks:\n  Order: { key: \"order:{id}\", params: { id: int64 } }\n",
		"testdata/lockgen.yaml": "not: a spec\n",
		"nested/go.mod":         "module example.com/nested\n",
		"nested/lockgen.yaml":   "not: a spec either\n",
	})
	code, stdout, stderr := lockgen(t, "generate", dir+"/...")
	want := filepath.Join(dir, "b/lockgen.yaml") + ":5:3: semaphore Export shares its keys shop:{Order:…} with lock Order at " +
		filepath.Join(dir, "a/lockgen.yaml") + ":5:3 (give one of the specs another namespace, or one of the objects another name or id)\n"
	if code != exitFail || stdout != "" || stderr != want {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s\nwant:   %s", code, stdout, stderr, want)
	}
	for _, d := range []string{"a", "b", "b/c"} {
		if exists(filepath.Join(dir, d, "lockgen.gen.go")) {
			t.Errorf("%s/lockgen.gen.go was written despite the collision", d)
		}
	}
	if code, _, stderr := lockgen(t, "check", dir+"/..."); code != exitFail || stderr != want {
		t.Errorf("check ./...: exit %d, stderr %s", code, stderr)
	}

	// Another id: no collision; every spec is generated, and checks.
	writeFiles(t, dir, map[string]string{"b/lockgen.yaml": "version: 1\npackage: b\nnamespace: shop\nsemaphores:\n  Export: { key: \"x\", permits: 2 }\n"})
	code, stdout, stderr = lockgen(t, "generate", dir+"/...")
	wantSilentSuccess(t, code, stdout, stderr)
	for _, d := range []string{"a", "b", "b/c"} {
		if !exists(filepath.Join(dir, d, "lockgen.gen.go")) {
			t.Errorf("%s/lockgen.gen.go was not written", d)
		}
	}
	code, stdout, stderr = lockgen(t, "check", dir+"/...")
	wantSilentSuccess(t, code, stdout, stderr)
	code, stdout, stderr = lockgen(t, "check", filepath.Join(dir, "a"), filepath.Join(dir, "b"))
	wantSilentSuccess(t, code, stdout, stderr)
}

func TestPackageMismatch(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":            "module example.com/m\n\ngo 1.26\n",
		"a/lockgen.yaml":    "version: 1\npackage: a\nnamespace: shop\nlocks:\n  Order: { key: \"order:{id}\", params: { id: int64 } }\n",
		"shop/lockgen.yaml": "version: 1\npackage: shoplocks\nnamespace: shop2\nlocks:\n  Order: { key: \"order:{id}\", params: { id: int64 } }\n",
		"shop/shop.go":      "package shop\n",
		"shop/shop_test.go": "package shop_test\n",
		"shop/ignored.go":   "//go:build ignore\n\npackage main\n",
	})
	code, _, stderr := lockgen(t, "generate", dir+"/...")
	want := filepath.Join(dir, "shop/lockgen.yaml") + ":2:10: package shoplocks differs from package shop of shop.go in the same directory (write package: shop, or move the spec to a directory of its own)\n"
	if code != exitFail || stderr != want {
		t.Fatalf("exit %d\nstderr: %s\nwant:   %s", code, stderr, want)
	}
	if exists(filepath.Join(dir, "a/lockgen.gen.go")) || exists(filepath.Join(dir, "shop/lockgen.gen.go")) {
		t.Error("a file was written despite the mismatch")
	}
	// The single-spec form checks it too.
	if code, _, stderr := lockgen(t, "generate", "-spec", filepath.Join(dir, "shop/lockgen.yaml")); code != exitFail || stderr != want {
		t.Errorf("-spec: exit %d, stderr %s", code, stderr)
	}
	writeFiles(t, dir, map[string]string{"shop/lockgen.yaml": strings.Replace("version: 1\npackage: shoplocks\nnamespace: shop2\n", "shoplocks", "shop", 1)})
	code, stdout, stderr := lockgen(t, "generate", dir+"/...")
	wantSilentSuccess(t, code, stdout, stderr)
}

func TestPatternErrors(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := lockgen(t, "generate", dir+"/..."); code != exitFail || !strings.Contains(stderr, "no lockgen.yaml found") {
		t.Errorf("empty tree: exit %d, stderr %s", code, stderr)
	}
	if code, _, stderr := lockgen(t, "check", "-spec", "x.yaml", "./..."); code != exitUsage || !strings.Contains(stderr, "not both") {
		t.Errorf("-spec and patterns: exit %d, stderr %s", code, stderr)
	}
}

// TestGoGeneratePerDirectory runs go generate ./... in a temporary module
// whose specs each have the Quickstart's go:generate line in their own
// directory: generate in one directory reads the module's other specs,
// so the collision fails the run, naming both positions, as check ./...
// does.
func TestGoGeneratePerDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lockgen and runs go generate")
	}
	bin := filepath.Join(t.TempDir(), "lockgen")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	const doc = "//go:generate ${LOCKGEN} generate\n"
	writeFiles(t, dir, map[string]string{
		"go.mod":           "module example.com/m\n\ngo 1.26\n",
		"a/doc.go":         doc + "package a\n",
		"a/lockgen.yaml":   "version: 1\npackage: a\nnamespace: shop\nlocks:\n  Order: { key: \"order:{id}\", params: { id: int64 } }\n",
		"b/doc.go":         doc + "package b\n",
		"b/lockgen.yaml":   "version: 1\npackage: b\nnamespace: shop\nsemaphores:\n  Export: { id: Order, key: \"x\", permits: 2 }\n",
		"c/d/doc.go":       doc + "package d\n",
		"c/d/lockgen.yaml": "version: 1\npackage: d\nnamespace: other\nlocks:\n  Order: { key: \"order:{id}\", params: { id: int64 } }\n",
	})
	goGenerate := func() (string, error) {
		cmd := exec.Command("go", "generate", "./...")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LOCKGEN="+bin, "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := goGenerate()
	want := "lockgen.yaml:5:3: lock Order shares its keys shop:{Order:…} with semaphore Export at ../b/lockgen.yaml:5:3"
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("go generate ./...: %v, want failure with %q\n%s", err, want, out)
	}
	if exists(filepath.Join(dir, "a/lockgen.gen.go")) {
		t.Error("a/lockgen.gen.go was written despite the collision")
	}
	// Run in b's directory alone, the collision is reported at b's object.
	cmd := exec.Command(bin, "generate")
	cmd.Dir = filepath.Join(dir, "b")
	wantB := "lockgen.yaml:5:3: semaphore Export shares its keys shop:{Order:…} with lock Order at ../a/lockgen.yaml:5:3"
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), wantB) {
		t.Errorf("lockgen generate in b: %v, want failure with %q\n%s", err, wantB, out)
	}

	// Another id: every directory generates.
	writeFiles(t, dir, map[string]string{"b/lockgen.yaml": "version: 1\npackage: b\nnamespace: shop\nsemaphores:\n  Export: { key: \"x\", permits: 2 }\n"})
	if out, err := goGenerate(); err != nil {
		t.Fatalf("go generate ./... without the collision: %v\n%s", err, out)
	}
	for _, d := range []string{"a", "b", "c/d"} {
		if !exists(filepath.Join(dir, d, "lockgen.gen.go")) {
			t.Errorf("%s/lockgen.gen.go was not written", d)
		}
	}
}

// TestBothPhases: a spec with problems the parser finds and problems only
// resolving its types finds reports both in one run.
func TestBothPhases(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":     "module example.com/m\n\ngo 1.26\n",
		"ids/ids.go": "package ids\n\ntype Ratio float64\n",
		"shop/lockgen.yaml": "version: 1\npackage: shop\nnamespace: shop\nlocks:\n" +
			"  Order:\n    key: \"order:{id}\"\n    params: { id: example.com/m/ids.Ratio }\n    leese: 30s\n" +
			"queues:\n  Mail: { key: mail, payload: example.com/m/ids.Mail }\n",
	})
	t.Setenv("GOFLAGS", "")
	t.Setenv("GOWORK", "off")
	code, stdout, stderr := lockgen(t, "generate", "-spec", filepath.Join(dir, "shop/lockgen.yaml"))
	spec := filepath.Join(dir, "shop/lockgen.yaml")
	want := spec + ":7:19: type example.com/m/ids.Ratio has underlying type float64, not an integer or string type (a key param is an integer or a string, or of a named type whose underlying type is one)\n" +
		spec + ":8:5: lock Order: unknown field \"leese\" (did you mean \"lease\"?)\n" +
		spec + ":10:31: queue Mail: payload package \"example.com/m/ids\" has no type Mail\n"
	if code != exitFail || stdout != "" || stderr != want {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s\nwant:   %s", code, stdout, stderr, want)
	}
}
