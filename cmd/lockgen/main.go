package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/lockgen/lockgen/internal/diff"
	"github.com/lockgen/lockgen/internal/evolve"
	"github.com/lockgen/lockgen/internal/gen"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/internal/specset"
	"github.com/lockgen/lockgen/internal/suggest"
	"github.com/lockgen/lockgen/runtime"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes (see the package documentation).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// commands are the sub-commands, in the order usage lists them.
var commands = []struct{ name, args, summary string }{
	{"generate", "[-spec lockgen.yaml | packages]", "Write the generated Go file next to the spec (or every spec under the packages, e.g. ./...)."},
	{"check", "[-spec lockgen.yaml | packages] [-base REF [-allow-breaking] [-format text|github]]", "Fail when the spec is invalid or the generated file is stale, or (with -base) changed incompatibly since REF."},
	{"version", "", "Print lockgen's version and the runtime API it generates for."},
	{"schema", "", "Print the JSON Schema of the spec format, for editors."},
	{"help", "[command]", "Print the usage of lockgen or of a command."},
}

// moreCommands are the commands implemented in files of their own
// (inspect.go), by name.
var moreCommands map[string]func(*cli, []string) int

// cli is one run of lockgen.
type cli struct {
	stdout, stderr io.Writer
}

// run runs lockgen with args (without the program name) and returns its
// exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("lockgen", flag.ContinueOnError)
	if code, ok := c.parse(fs, args, c.usage); !ok {
		return code
	}
	if fs.NArg() == 0 {
		c.usage(stderr)
		return exitUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	switch name {
	case "generate":
		return c.generate(rest)
	case "check":
		return c.check(rest)
	case "version":
		return c.version(rest)
	case "schema":
		return c.schema(rest)
	case "help":
		return c.help(rest)
	}
	if f := moreCommands[name]; f != nil {
		return f(c, rest)
	}
	var names []string
	for _, cmd := range commands {
		names = append(names, cmd.name)
	}
	if s := suggest.Closest(name, names); s != "" {
		fmt.Fprintf(stderr, "lockgen: unknown command %q; did you mean %q?\n\n", name, s)
		return exitUsage
	}
	fmt.Fprintf(stderr, "lockgen: unknown command %q\n\n", name)
	c.usage(stderr)
	return exitUsage
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, "Lockgen generates typed Go wrappers for the distributed locks declared in a\n"+
		"YAML spec, over lockgen's runtime on Redis.\n\n"+
		"Usage:\n\n\tlockgen <command> [flags]\n\nThe commands are:\n\n")
	for _, cmd := range commands {
		fmt.Fprintf(w, "\t%-9s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprint(w, "\nRun \"lockgen <command> -h\" for the flags of a command.\n\n"+
		"Exit status: 0 ok, 1 spec invalid or generated file stale, 2 usage error.\n")
}

// flags returns the flag set of a command; usage prints its usage.
func (c *cli) flags(name string) (fs *flag.FlagSet, usage func(io.Writer)) {
	fs = flag.NewFlagSet("lockgen "+name, flag.ContinueOnError)
	return fs, func(w io.Writer) {
		for _, cmd := range commands {
			if cmd.name == name {
				fmt.Fprintf(w, "Usage: %s\n\n%s\n", strings.TrimSpace("lockgen "+cmd.name+" "+cmd.args), cmd.summary)
			}
		}
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(w, "\nFlags:\n")
			fs.SetOutput(w)
			fs.PrintDefaults()
		}
	}
}

// parse parses args into fs, allowing no arguments after the flags unless
// positional. On -h it prints usage to stdout; on a bad flag or argument,
// the problem and usage to stderr. ok is false when the caller should
// return code.
func (c *cli) parse(fs *flag.FlagSet, args []string, usage func(io.Writer)) (code int, ok bool) {
	fs.SetOutput(c.stderr)
	fs.Usage = func() {} // printed below, to the right writer
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		usage(c.stdout)
		return exitOK, false
	case err != nil:
		fmt.Fprintln(c.stderr)
		usage(c.stderr)
		return exitUsage, false
	}
	return exitOK, true
}

// parseCommand parses the flags of a command that takes no arguments.
func (c *cli) parseCommand(fs *flag.FlagSet, args []string, usage func(io.Writer)) (code int, ok bool) {
	if code, ok := c.parse(fs, args, usage); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "%s: unexpected argument %q\n\n", fs.Name(), fs.Arg(0))
		usage(c.stderr)
		return exitUsage, false
	}
	return exitOK, true
}

// specFlag declares the -spec flag of generate and check.
func specFlag(fs *flag.FlagSet) *string {
	return fs.String("spec", "lockgen.yaml", "the spec `file`; the generated file goes into its directory")
}

// unit is one spec and what it generates.
type unit struct {
	path, dir string
	spec      *spec.Spec
	files     []gen.File
}

// specPaths returns the specs a generate or check names: those the
// package patterns after the flags match, or else -spec's.
func (c *cli) specPaths(fs *flag.FlagSet, path string, usage func(io.Writer)) ([]string, int, bool) {
	if fs.NArg() == 0 {
		return []string{path}, exitOK, true
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "spec" })
	if explicit {
		fmt.Fprintf(c.stderr, "%s: give -spec or package patterns, not both\n\n", fs.Name())
		usage(c.stderr)
		return nil, exitUsage, false
	}
	for _, pat := range fs.Args() {
		if !strings.HasPrefix(pat, ".") && !filepath.IsAbs(pat) {
			fmt.Fprintf(c.stderr, "%s: %q is not a package pattern; write a directory such as ./shop or ./...\n\n", fs.Name(), pat)
			usage(c.stderr)
			return nil, exitUsage, false
		}
	}
	paths, err := specset.Find(fs.Args())
	if err != nil {
		fmt.Fprintf(c.stderr, "lockgen: %v\n", err)
		return nil, exitFail, false
	}
	return paths, exitOK, true
}

// load parses the specs at paths and generates their files, printing
// every problem to stderr: the specs' diagnostics, a package clause that
// differs from the Go files beside a spec, and objects that share keys
// with those of another spec, named or elsewhere in the module (so that
// go:generate in one directory finds what check ./... finds). ok is false
// when there was any.
func (c *cli) load(paths []string) (units []unit, ok bool) {
	var diags spec.Diagnostics
	var specs []*spec.Spec
	failed := false
	for _, path := range paths {
		s, err := spec.LoadPartial(path)
		u := unit{path: path, dir: filepath.Dir(path), spec: s}
		var ds spec.Diagnostics
		if errors.As(err, &ds) && s != nil {
			// Report the type-resolution phase's problems too, in
			// the same run, as far as the spec could be read.
			var more spec.Diagnostics
			if cerr := gen.Check(s, gen.Options{Dir: u.dir}); errors.As(cerr, &more) {
				ds = append(ds, more...)
				err = ds
			}
		}
		if err == nil {
			specs = append(specs, s)
			if d := specset.CheckPackage(s, u.dir); d != nil {
				diags = append(diags, *d)
				continue
			}
			u.files, err = gen.Generate(s, gen.Options{Dir: u.dir})
		}
		switch {
		case errors.As(err, &ds):
			diags = append(diags, ds...)
		case err != nil:
			fmt.Fprintf(c.stderr, "lockgen: %v\n", err)
			failed = true
		default:
			units = append(units, u)
		}
	}
	others, err := specset.Others(paths, specs)
	if err != nil {
		fmt.Fprintf(c.stderr, "lockgen: %v\n", err)
		failed = true
	}
	diags = append(diags, specset.CollisionsWith(specs, others)...)
	diags.Sort()
	for _, d := range diags {
		fmt.Fprintln(c.stderr, d.String())
	}
	return units, !failed && len(diags) == 0
}

func (c *cli) generate(args []string) int {
	fs, usage := c.flags("generate")
	path := specFlag(fs)
	if code, ok := c.parse(fs, args, usage); !ok {
		return code
	}
	paths, code, ok := c.specPaths(fs, *path, usage)
	if !ok {
		return code
	}
	units, ok := c.load(paths)
	if !ok {
		return exitFail // nothing written
	}
	for _, u := range units {
		for _, f := range u.files {
			name := filepath.Join(u.dir, f.Name)
			if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, f.Content) {
				continue // unchanged: keep its modification time
			}
			if err := os.WriteFile(name, f.Content, 0o644); err != nil {
				fmt.Fprintf(c.stderr, "lockgen: %v\n", err)
				return exitFail
			}
		}
	}
	return exitOK
}

func (c *cli) check(args []string) int {
	fs, usage := c.flags("check")
	path := specFlag(fs)
	base := fs.String("base", "", "also compare each spec with the one at the git `revision` (a branch, tag or commit) and report changes that break a rolling deploy")
	allow := fs.Bool("allow-breaking", false, "with -base: report breaking changes but exit 0")
	format := fs.String("format", "text", "how to print -base findings: text (file:line:col: message) or github (workflow annotations)")
	if code, ok := c.parse(fs, args, usage); !ok {
		return code
	}
	if *format != "text" && *format != "github" {
		fmt.Fprintf(c.stderr, "lockgen check: -format is text or github, not %q\n\n", *format)
		usage(c.stderr)
		return exitUsage
	}
	paths, code, ok := c.specPaths(fs, *path, usage)
	if !ok {
		return code
	}
	units, ok := c.load(paths)
	if !ok {
		return exitFail
	}
	code = exitOK
	for _, u := range units {
		if c.stale(u.dir, u.files) != exitOK {
			code = exitFail
		}
		if *base != "" && c.compare(u.path, u.spec, *base, *allow, *format) != exitOK {
			code = exitFail
		}
	}
	return code
}

// compare prints the findings of comparing s, read from path, with the
// spec at the git revision base, and returns the exit code they make.
func (c *cli) compare(path string, s *spec.Spec, base string, allow bool, format string) int {
	res, err := evolve.Check(path, s, base)
	if err != nil {
		fmt.Fprintf(c.stderr, "lockgen: %v\n", err)
		return exitFail
	}
	breaking := 0
	for _, f := range res.Findings {
		if f.Severity == evolve.Breaking {
			breaking++
		}
		if format == "github" {
			fmt.Fprintln(c.stdout, evolve.Annotation(f, res.RepoFile))
		} else {
			fmt.Fprintln(c.stdout, f.String())
		}
	}
	switch {
	case breaking > 0 && allow:
		fmt.Fprintf(c.stderr, "lockgen: %s since %s, allowed by -allow-breaking\n", plural(breaking, "breaking change"), base)
	case breaking > 0:
		fmt.Fprintf(c.stderr, "lockgen: %s since %s (deploy with care, then pass -allow-breaking to accept)\n", plural(breaking, "breaking change"), base)
		return exitFail
	}
	return exitOK
}

// plural returns "1 thing" or "n things".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// stale prints a diff for every generated file that differs from the
// one on disk, and returns the exit code.
func (c *cli) stale(dir string, files []gen.File) int {
	code := exitOK
	for _, f := range files {
		name := filepath.Join(dir, f.Name)
		old, err := os.ReadFile(name)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(c.stderr, "lockgen: %v\n", err)
			return exitFail
		}
		d := diff.Unified(name+" (on disk)", name+" (generated)", old, f.Content)
		if d == nil {
			continue
		}
		c.stdout.Write(d)
		state := "stale"
		if err != nil {
			state = "missing"
		}
		fmt.Fprintf(c.stderr, "lockgen: %s is %s; run lockgen generate\n", name, state)
		code = exitFail
	}
	return code
}

func (c *cli) version(args []string) int {
	fs, usage := c.flags("version")
	if code, ok := c.parseCommand(fs, args, usage); !ok {
		return code
	}
	fmt.Fprintf(c.stdout, "lockgen %s (runtime API %d)\n", moduleVersion(debug.ReadBuildInfo()), gen.RuntimeAPI)
	return exitOK
}

// modulePath is lockgen's module.
const modulePath = "github.com/lockgen/lockgen"

// moduleVersion returns lockgen's module version from the build info:
// v1.2.0 when installed as a tool or with go install …@v1.2.0, a
// pseudo-version or "(devel)" when built in its own repository, where the
// runtime's Version says more.
func moduleVersion(info *debug.BuildInfo, ok bool) string {
	v := ""
	if ok {
		if info.Main.Path == modulePath {
			v = info.Main.Version
		}
		for _, d := range info.Deps {
			if d.Path == modulePath {
				v = d.Version
				if d.Replace != nil {
					v = d.Replace.Version
				}
			}
		}
	}
	switch v {
	case "", "(devel)":
		return runtime.Version + " (devel)"
	}
	return v
}

func (c *cli) schema(args []string) int {
	fs, usage := c.flags("schema")
	if code, ok := c.parseCommand(fs, args, usage); !ok {
		return code
	}
	c.stdout.Write(spec.Schema)
	return exitOK
}

func (c *cli) help(args []string) int {
	fs, usage := c.flags("help")
	if code, ok := c.parse(fs, args, usage); !ok {
		return code
	}
	switch fs.NArg() {
	case 0:
		c.usage(c.stdout)
		return exitOK
	case 1:
		if fs.Arg(0) != "help" {
			// A command's usage is what its -h prints.
			return run([]string{fs.Arg(0), "-h"}, c.stdout, c.stderr)
		}
		usage(c.stdout)
		return exitOK
	}
	fmt.Fprintf(c.stderr, "lockgen help: unexpected argument %q\n\n", fs.Arg(1))
	usage(c.stderr)
	return exitUsage
}
