package evolve

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockgen/lockgen/internal/spec"
)

var update = flag.Bool("update", false, "rewrite testdata/evolve/*/findings.golden")

const casesDir = "../../testdata/evolve"

func TestMain(m *testing.M) {
	// Payload types load with the go command from temporary modules that
	// need nothing from the network.
	os.Setenv("GOPROXY", "off")
	os.Setenv("GOWORK", "off")
	os.Setenv("GOTOOLCHAIN", "local")
	os.Setenv("GOFLAGS", "-mod=mod")
	os.Exit(m.Run())
}

// gitRepo makes a git work tree in a new directory holding a module
// example.com/evo, commits the files of base into it, and then replaces
// them with those of head (uncommitted). It returns the directory.
func gitRepo(t *testing.T, base, head string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("these tests need git in PATH")
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module example.com/evo\n\ngo 1.26\n")
	copyTree(t, base, dir)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != ".git" && e.Name() != "go.mod" {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	copyTree(t, head, dir)
	return dir
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		write(t, filepath.Join(to, rel), string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGolden runs every case of testdata/evolve: base/ is committed, head/
// is the working tree, and findings.golden what Check reports. There is a
// case for every breaking and warning class.
func TestGolden(t *testing.T) {
	entries, err := os.ReadDir(casesDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 13 {
		t.Fatalf("found %d cases, want at least 13", len(entries))
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			c := filepath.Join(casesDir, e.Name())
			dir := gitRepo(t, filepath.Join(c, "base"), filepath.Join(c, "head"))
			path := filepath.Join(dir, "lockgen.yaml")
			cur, err := spec.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Check(path, cur, "main")
			if err != nil {
				t.Fatal(err)
			}
			if res.RepoFile != "lockgen.yaml" {
				t.Errorf("RepoFile = %q, want lockgen.yaml", res.RepoFile)
			}
			var b strings.Builder
			for _, f := range res.Findings {
				b.WriteString(strings.ReplaceAll(f.String(), dir+string(filepath.Separator), "") + "\n")
			}
			got := b.String()
			golden := filepath.Join(c, "findings.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("findings differ from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// TestCodecChange changes a queue's codec, which no two-codec spec can
// show yet while json is the only codec: the kind table marks codec
// Breaking, and Compare reports it.
func TestCodecChange(t *testing.T) {
	src := "version: 1\npackage: p\nnamespace: n\nqueues:\n  Mail: { key: mail, payload: string, codec: json }\n"
	old, err := spec.Parse("lockgen.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := spec.Parse("lockgen.yaml", []byte(src))
	cur.Queues[0].Codec = "msgpack"
	p := Payloads{}
	fs := Compare(old, cur, "main", p)
	if len(fs) != 1 || fs[0].Severity != Breaking || !strings.Contains(fs[0].Msg, "codec changed from json to msgpack") || fs[0].Pos.Col != 46 {
		t.Fatalf("findings %v, want one breaking codec change at the codec's value", fs)
	}
}

func TestNotGit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lockgen.yaml")
	write(t, path, "version: 1\npackage: p\nnamespace: n\n")
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(path, s, "main"); !errors.Is(err, ErrNotGit) {
		t.Fatalf("error %v, want ErrNotGit", err)
	}
}

func TestUnknownRef(t *testing.T) {
	c := filepath.Join(casesDir, "renamed")
	dir := gitRepo(t, filepath.Join(c, "base"), filepath.Join(c, "head"))
	path := filepath.Join(dir, "lockgen.yaml")
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"nosuchbranch", "--output=x", "main~5"} {
		if _, err := Check(path, s, ref); !errors.Is(err, ErrUnknownRef) {
			t.Errorf("ref %q: error %v, want ErrUnknownRef", ref, err)
		}
	}
}

func TestNewSpec(t *testing.T) {
	c := filepath.Join(casesDir, "renamed")
	dir := gitRepo(t, filepath.Join(c, "base"), filepath.Join(c, "head"))
	path := filepath.Join(dir, "sub", "lockgen.yaml")
	write(t, path, "version: 1\npackage: p\nnamespace: n\n")
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Check(path, s, "main")
	if err != nil || !res.NewAtBase || len(res.Findings) != 0 {
		t.Fatalf("Check = %+v, %v; want NewAtBase and no findings", res, err)
	}
}

func TestAnnotation(t *testing.T) {
	f := Finding{Pos: spec.Pos{File: "x", Line: 3, Col: 5}, Severity: Breaking, Msg: "50% moved\nnow", Hint: "add id: A"}
	got := Annotation(f, "dir,a/lockgen.yaml")
	want := "::error file=dir%2Ca/lockgen.yaml,line=3,col=5::50%25 moved%0Anow (add id: A)"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	f.Severity = Warning
	if got := Annotation(f, "a"); !strings.HasPrefix(got, "::warning file=a,line=3,col=5::") {
		t.Errorf("warning annotation %s", got)
	}
}
