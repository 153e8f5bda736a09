package gen

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/lockgen/lockgen/internal/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/gen")

// The golden files of a case in testdata/gen/<case>/: the expected output,
// or the expected error text when generation fails.
const (
	goldenOutput = "lockgen.gen.go"
	goldenErrors = "errors.golden"
)

const testdataDir = "../../testdata/gen"

func TestMain(m *testing.M) {
	// The go command runs (to resolve named param types, and in
	// TestCompile) against a temporary module whose dependencies are all
	// in the module cache: never touch the network or another toolchain.
	// -trimpath keeps the build cache's entries independent of the
	// module's (new, temporary) directory: TestCompile then compiles
	// only the cases whose generated code changed.
	os.Setenv("GOPROXY", "off")
	os.Setenv("GOWORK", "off")
	os.Setenv("GOTOOLCHAIN", "local")
	os.Setenv("GOFLAGS", "-mod=mod -trimpath")
	os.Exit(m.Run())
}

// cases returns the names of the cases in testdata/gen.
func cases(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(testdataDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(testdataDir, e.Name(), "lockgen.yaml")); err == nil {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatal("no cases in " + testdataDir)
	}
	return names
}

// newModule returns the directory of a new temporary module
// example.com/gentest that requires this repository's module (replaced by
// the working tree) and holds every case's inputs (all but the golden
// files) in <dir>/<case>, so that generated code can resolve and import
// the case's own packages (example.com/gentest/<case>/...).
func newModule(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := modfile.ParseLax("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The requirements of this repository's go.mod make the module graph
	// complete, so the go command needs no network.
	var mod modfile.File
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(mod.AddModuleStmt("example.com/gentest"))
	check(mod.AddGoStmt(repo.Go.Version))
	mod.AddNewRequire(repo.Module.Mod.Path, "v0.0.0", false)
	for _, r := range repo.Require {
		mod.AddNewRequire(r.Mod.Path, r.Mod.Version, true)
	}
	check(mod.AddReplace(repo.Module.Mod.Path, "", root, ""))
	out, err := mod.Format()
	check(err)

	dir := t.TempDir()
	check(os.WriteFile(filepath.Join(dir, "go.mod"), out, 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	check(err)
	check(os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	check(filepath.WalkDir(testdataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == goldenOutput || d.Name() == goldenErrors {
			return err
		}
		rel, err := filepath.Rel(testdataDir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	}))
	return dir
}

// generateCase generates the case in dir. When its spec is invalid, the
// error lists the spec's problems and those Check finds, as lockgen
// reports them in one run.
func generateCase(t *testing.T, dir string) ([]File, error) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "lockgen.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, ds := spec.ParsePartial("lockgen.yaml", data)
	if len(ds) > 0 {
		var more spec.Diagnostics
		if err := Check(s, Options{Dir: dir}); err != nil && !errors.As(err, &more) {
			t.Fatalf("Check failed without diagnostics: %v", err)
		}
		ds = append(ds, more...)
		ds.Sort()
		return nil, ds
	}
	return Generate(s, Options{Dir: dir})
}

// lookupNoise is the part of go/packages' message for a package no module
// provides that depends on the module cache (which module the go command
// was looking up when GOPROXY=off stopped it): cut, so that the goldens
// hold on any machine.
var lookupNoise = regexp.MustCompile(`(cannot load package "[^"]+": )[^\n]*?( \(named)`)

func TestGolden(t *testing.T) {
	mod := newModule(t)
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files, err := generateCase(t, filepath.Join(mod, name))
			var got []byte
			golden, stale := goldenOutput, goldenErrors
			switch {
			case err != nil:
				var diags spec.Diagnostics
				if !errors.As(err, &diags) {
					t.Fatalf("Generate failed without diagnostics: %v", err)
				}
				got = lookupNoise.ReplaceAll([]byte(err.Error()+"\n"), []byte("$1…$2"))
				golden, stale = goldenErrors, goldenOutput
			case len(files) != 1 || files[0].Name != "lockgen.gen.go":
				t.Fatalf("Generate returned %d files, want one lockgen.gen.go", len(files))
			default:
				got = files[0].Content
			}
			dir := filepath.Join(testdataDir, name)
			if *update {
				if err := os.WriteFile(filepath.Join(dir, golden), got, 0o644); err != nil {
					t.Fatal(err)
				}
				os.Remove(filepath.Join(dir, stale))
				return
			}
			want, err := os.ReadFile(filepath.Join(dir, golden))
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the output; run go test -update and review the diff\n--- got\n%s", golden, got)
			}
		})
	}
}

// TestCompile builds and vets the generated code of every case that
// generates, together with the case's own Go files, in one module.
func TestCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the compile test needs the go command: %v", err)
	}
	mod := newModule(t)
	built := 0
	for _, name := range cases(t) {
		dir := filepath.Join(mod, name)
		files, err := generateCase(t, dir)
		if err != nil {
			continue // an error case: TestGolden checks the errors
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f.Name), f.Content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		built++
	}
	if built == 0 {
		t.Fatal("no case generates code")
	}
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = mod
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Logf("built and vetted %d cases", built)
}

// TestRegenerateOverBrokenOutput regenerates a package whose param type is
// declared next to a generated file that no longer compiles, as after an
// upgrade that renames the runtime's version pin: resolving the type must
// not need the package to build.
func TestRegenerateOverBrokenOutput(t *testing.T) {
	mod := newModule(t)
	dir := filepath.Join(mod, "named")
	broken := "package namedlocks\n\nimport lockrt \"github.com/lockgen/lockgen/runtime\"\n\nconst _ = lockrt.GeneratedCodeVersion0\n"
	if err := os.WriteFile(filepath.Join(dir, goldenOutput), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := generateCase(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(testdataDir, "named", goldenOutput))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files[0].Content, want) {
		t.Error("output differs from testdata/gen/named's golden file")
	}
}
