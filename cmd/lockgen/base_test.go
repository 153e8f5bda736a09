package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitSpec commits base as lockgen.yaml in a new git work tree, then
// writes head over it and generates its code. It returns the spec's path.
func gitSpec(t *testing.T, base, head string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "lockgen.yaml")
	if err := os.WriteFile(path, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(path, []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := lockgen(t, "generate", "-spec", path); code != 0 {
		t.Fatal(stderr)
	}
	return path
}

const (
	baseSpec = "version: 1\npackage: p\nnamespace: n\nlocks:\n  Order: { key: \"order:{id}\", params: { id: int64 } }\n"
	headSpec = "version: 1\npackage: p\nnamespace: n\nlocks:\n  OrderMutex: { key: \"order:{id}\", params: { id: int64 }, lease: 1m }\n"
)

func TestCheckBase(t *testing.T) {
	path := gitSpec(t, baseSpec, headSpec)

	code, stdout, stderr := lockgen(t, "check", "-spec", path, "-base", "main")
	if code != exitFail {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stdout, "lockgen.yaml:5:3: lock OrderMutex was renamed from Order") || !strings.Contains(stdout, "(add id: Order to OrderMutex to keep its keys)") {
		t.Errorf("stdout lacks the rename and its hint:\n%s", stdout)
	}
	if !strings.Contains(stdout, "lockgen.yaml:5:66: warning: lock OrderMutex: lease changed from 30s to 1m") {
		t.Errorf("stdout lacks the lease warning:\n%s", stdout)
	}
	if !strings.Contains(stderr, "1 breaking change since main") {
		t.Errorf("stderr: %s", stderr)
	}

	code, _, stderr = lockgen(t, "check", "-spec", path, "-base", "main", "-allow-breaking")
	if code != exitOK || !strings.Contains(stderr, "allowed by -allow-breaking") {
		t.Errorf("-allow-breaking: exit %d, stderr %s", code, stderr)
	}

	code, stdout, _ = lockgen(t, "check", "-spec", path, "-base", "main", "-format", "github")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != exitFail || len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "::error file=lockgen.yaml,line=5,col=3::lock OrderMutex was renamed") ||
		!strings.HasPrefix(lines[1], "::warning file=lockgen.yaml,line=5,col=66::lock OrderMutex: lease changed") {
		t.Errorf("github format: exit %d\n%s", code, stdout)
	}

	// With id: the rename keeps its keys: only the warning is left.
	fixed := strings.Replace(headSpec, "{ key:", "{ id: Order, key:", 1)
	path = gitSpec(t, baseSpec, fixed)
	code, stdout, stderr = lockgen(t, "check", "-spec", path, "-base", "main")
	if code != exitOK || strings.Contains(stdout, "renamed") || !strings.Contains(stdout, "warning: lock OrderMutex: lease changed") {
		t.Errorf("with id: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestCheckBaseErrors(t *testing.T) {
	_, spec, _ := specDir(t, baseSpec)
	if code, _, stderr := lockgen(t, "generate", "-spec", spec); code != 0 {
		t.Fatal(stderr)
	}
	code, _, stderr := lockgen(t, "check", "-spec", spec, "-base", "main")
	if code != exitFail || !strings.Contains(stderr, "not in a git repository") {
		t.Errorf("outside git: exit %d, stderr %s", code, stderr)
	}

	path := gitSpec(t, baseSpec, baseSpec)
	code, _, stderr = lockgen(t, "check", "-spec", path, "-base", "v9.9.9")
	if code != exitFail || !strings.Contains(stderr, `unknown revision "v9.9.9"`) {
		t.Errorf("unknown ref: exit %d, stderr %s", code, stderr)
	}
	code, stdout, stderr := lockgen(t, "check", "-spec", path, "-base", "main")
	if code != exitOK || stdout != "" || stderr != "" {
		t.Errorf("unchanged: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if code, _, _ := lockgen(t, "check", "-spec", path, "-base", "main", "-format", "json"); code != exitUsage {
		t.Errorf("-format json: exit %d, want 2", code)
	}
}
