package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgen/lockgen/internal/gen"
	"github.com/lockgen/lockgen/runtime"
)

// lockgen runs the command in-process and returns its exit code and output.
func lockgen(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = run(args, &out, &errs)
	return code, out.String(), errs.String()
}

// specDir returns a temporary directory holding spec as lockgen.yaml.
func specDir(t *testing.T, spec string) (dir, specPath, genPath string) {
	t.Helper()
	dir = t.TempDir()
	specPath = filepath.Join(dir, "lockgen.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, specPath, filepath.Join(dir, "lockgen.gen.go")
}

func readCase(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/gen", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func wantSilentSuccess(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("exit %d, want 0 and no output\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestGenerateThenCheck(t *testing.T) {
	_, spec, out := specDir(t, readCase(t, "basic/lockgen.yaml"))

	code, stdout, stderr := lockgen(t, "generate", "-spec", spec)
	wantSilentSuccess(t, code, stdout, stderr)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := readCase(t, "basic/lockgen.gen.go"); string(got) != want {
		t.Fatalf("generate wrote something else than testdata/gen/basic/lockgen.gen.go:\n%s", got)
	}

	code, stdout, stderr = lockgen(t, "check", "-spec", spec)
	wantSilentSuccess(t, code, stdout, stderr)
}

func TestGenerateKeepsUnchangedFile(t *testing.T) {
	_, spec, out := specDir(t, readCase(t, "basic/lockgen.yaml"))
	if code, _, stderr := lockgen(t, "generate", "-spec", spec); code != 0 {
		t.Fatal(stderr)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(out, old, old); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := lockgen(t, "generate", "-spec", spec); code != 0 {
		t.Fatal(stderr)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(old) {
		t.Errorf("generate rewrote an up-to-date file (modified %v, want %v)", fi.ModTime(), old)
	}
}

func TestDefaultSpecInCurrentDirectory(t *testing.T) {
	dir, _, out := specDir(t, readCase(t, "simple/lockgen.yaml"))
	t.Chdir(dir)
	code, stdout, stderr := lockgen(t, "generate")
	wantSilentSuccess(t, code, stdout, stderr)
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = lockgen(t, "check")
	wantSilentSuccess(t, code, stdout, stderr)
}

func TestCheckStale(t *testing.T) {
	_, spec, out := specDir(t, readCase(t, "basic/lockgen.yaml"))
	if code, _, stderr := lockgen(t, "generate", "-spec", spec); code != 0 {
		t.Fatal(stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "Lease:   30 * time.Second,", "Lease:   time.Minute,", 1)
	if edited == string(data) {
		t.Fatal("the generated file has no lease line to edit")
	}
	if err := os.WriteFile(out, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := lockgen(t, "check", "-spec", spec)
	if code != 1 {
		t.Fatalf("check of an edited file: exit %d, want 1", code)
	}
	wantDiff := "--- " + out + " (on disk)\n+++ " + out + " (generated)\n@@ -"
	if !strings.HasPrefix(stdout, wantDiff) {
		t.Errorf("stdout does not start with %q:\n%s", wantDiff, stdout)
	}
	for _, want := range []string{"\n-\t\tLease:   time.Minute,\n", "\n+\t\tLease:   30 * time.Second,\n", "\n \t\tKind:    lockimpl.Reentrant,\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "is stale; run lockgen generate") {
		t.Errorf("stderr: %s", stderr)
	}
	if after, _ := os.ReadFile(out); string(after) != edited {
		t.Error("check changed the file")
	}
}

func TestCheckMissing(t *testing.T) {
	_, spec, out := specDir(t, readCase(t, "basic/lockgen.yaml"))
	code, stdout, stderr := lockgen(t, "check", "-spec", spec)
	if code != 1 || !strings.Contains(stdout, "\n@@ -0,0 +1,") || !strings.Contains(stderr, "is missing") {
		t.Fatalf("check without a generated file: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("check wrote the file")
	}
}

var diagLine = regexp.MustCompile(`^\S*lockgen\.yaml:\d+:\d+: \S`)

func TestInvalidSpec(t *testing.T) {
	for _, c := range []struct{ name, spec string }{
		{"parse", "version: 1\npackage: shoplocks\nlocks:\n  Order:\n    key: \"order:{orderID}\"\n    lease: soon\n"},
		{"generate", readCase(t, "badnames/lockgen.yaml")},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, spec, out := specDir(t, c.spec)
			for _, cmd := range []string{"check", "generate"} {
				code, stdout, stderr := lockgen(t, cmd, "-spec", spec)
				if code != 1 || stdout != "" {
					t.Fatalf("%s: exit %d, stdout %q; want 1 and nothing", cmd, code, stdout)
				}
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if len(lines) < 2 {
					t.Errorf("%s: want every problem, got:\n%s", cmd, stderr)
				}
				for _, l := range lines {
					if !diagLine.MatchString(l) || !strings.HasPrefix(l, spec+":") {
						t.Errorf("%s: %q is not a file:line:col diagnostic", cmd, l)
					}
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Error("a file was generated from an invalid spec")
			}
		})
	}
}

func TestMissingSpec(t *testing.T) {
	code, stdout, stderr := lockgen(t, "generate", "-spec", filepath.Join(t.TempDir(), "nope.yaml"))
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "lockgen: ") || !strings.Contains(stderr, "nope.yaml") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"help"}, {"generate", "-h"}, {"check", "-help"}, {"version", "-h"}, {"schema", "-h"}, {"help", "check"}, {"help", "help"}} {
		code, stdout, stderr := lockgen(t, args...)
		if code != 0 || !strings.Contains(stdout, "Usage") || stderr != "" {
			t.Errorf("lockgen %s: exit %d, want 0 and usage on stdout\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	_, stdout, _ := lockgen(t, "check", "-h")
	if !strings.Contains(stdout, "lockgen check [-spec lockgen.yaml") || !strings.Contains(stdout, "-spec file") {
		t.Errorf("check -h does not show its flags:\n%s", stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"-x"},
		{"generate", "-x"},
		{"generate", "extra"},
		{"check", "-spec"},
		{"version", "extra"},
		{"help", "frobnicate"},
		{"help", "check", "extra"},
	} {
		code, stdout, stderr := lockgen(t, args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "Usage") {
			t.Errorf("lockgen %s: exit %d, want 2 and usage on stderr\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	_, _, stderr := lockgen(t, "frobnicate")
	if !strings.HasPrefix(stderr, `lockgen: unknown command "frobnicate"`) {
		t.Errorf("stderr: %s", stderr)
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := lockgen(t, "version")
	// A test binary's build info names no lockgen module version.
	if code != 0 || stdout != "lockgen "+runtime.Version+" (devel) (runtime API "+strconv.Itoa(gen.RuntimeAPI)+")\n" || stderr != "" {
		t.Fatalf("exit %d\nstdout: %q\nstderr: %q", code, stdout, stderr)
	}
}

func TestModuleVersion(t *testing.T) {
	for _, tc := range []struct {
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{&debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.4.0"}}, true, "v1.4.0"},
		{&debug.BuildInfo{Main: debug.Module{Path: "example.com/shop"}, Deps: []*debug.Module{{Path: modulePath, Version: "v1.3.2"}}}, true, "v1.3.2"},
		{&debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, true, runtime.Version + " (devel)"},
		{nil, false, runtime.Version + " (devel)"},
	} {
		if got := moduleVersion(tc.info, tc.ok); got != tc.want {
			t.Errorf("moduleVersion(%+v) = %q, want %q", tc.info, got, tc.want)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	code, stdout, stderr := lockgen(t, "generat")
	if code != exitUsage || stdout != "" || stderr != "lockgen: unknown command \"generat\"; did you mean \"generate\"?\n\n" {
		t.Errorf("exit %d\nstdout: %q\nstderr: %q", code, stdout, stderr)
	}
}

func TestSchema(t *testing.T) {
	code, stdout, stderr := lockgen(t, "schema")
	if code != 0 || stderr != "" || !json.Valid([]byte(stdout)) || !strings.Contains(stdout, `"locks"`) {
		t.Fatalf("exit %d, stderr %q, stdout not the JSON Schema:\n%.200s", code, stderr, stdout)
	}
}
