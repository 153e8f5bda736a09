package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVettoolAndStandalone builds leasecheck and runs it on a package
// that uses the real runtime, through go vet -vettool and on its own.
func TestVettoolAndStandalone(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "leasecheck")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
	bin := filepath.Join(t.TempDir(), "leasecheck")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
	bin := filepath.Join(t.TempDir(), "leasecheck")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "./examples/...")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("leasecheck ./examples/...: %v\n%s", err, out)
	}
}
