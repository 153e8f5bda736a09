package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binDir    string
	builtBin  string
	buildErr  error
)

// build returns the path of leasecheck built from this directory, built
// once for the test binary's tests.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "leasecheck"); buildErr != nil {
			return
		}
		builtBin = filepath.Join(binDir, "leasecheck")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// TestVettoolAndStandalone builds leasecheck and runs it on a package
// that uses the real runtime, through go vet -vettool and on its own.
func TestVettoolAndStandalone(t *testing.T) {
	bin := build(t)
	const pkg = "../../internal/leasecheck/testdata/vet"
	want := []string{
		"vet.go:14:2: lease is not released on all paths",
		"vet.go:19:3: this return statement may be reached without releasing lease, obtained on line 14",
		"vet.go:22:14: ctx is the context lease was obtained with",
	}
	for _, args := range [][]string{
		{"go", "vet", "-vettool=" + bin, pkg},
		{bin, pkg},
	} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err == nil {
			t.Errorf("%s: exit 0, want failure\n%s", strings.Join(args, " "), out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
	}
}

// TestQuickstartPackage runs leasecheck on code written from the
// Quickstart, which uses a generated package and never imports the
// runtime: it gets every report (leasecheck once skipped such packages,
// exit 0 and silent), and none for a release wrapped in a call or a
// finding silenced with //lockgen:ignore.
func TestQuickstartPackage(t *testing.T) {
	bin := build(t)
	want := []string{
		"quickstart.go:15:2: lease is not released on all paths",
		"quickstart.go:20:3: this return statement may be reached without releasing lease, obtained on line 15",
		"quickstart.go:27:2: the permit returned by Acquire is discarded",
		"quickstart.go:37:17: ctx is the context lease was obtained with",
		"quickstart.go:47:15: ctx is the context lease was obtained with",
		"quickstart.go:80:2: the lease is discarded",
	}
	out, err := exec.Command(bin, "../../internal/leasecheck/testdata/quickstart").CombinedOutput()
	if err == nil {
		t.Errorf("exit 0, want failure\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(want) {
		t.Errorf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestExamples runs leasecheck on every example (the code users copy):
// none may leave a lease or permit unreleased, or work inside a hold with
// the caller's context. examples/ops/demo keeps its holds on purpose, in
// a value of its own.
func TestExamples(t *testing.T) {
	bin := build(t)
	cmd := exec.Command(bin, "./examples/...")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("leasecheck ./examples/...: %v\n%s", err, out)
	}
}
