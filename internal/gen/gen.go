// Package gen turns a validated spec into Go source: typed wrappers over
// lockgen's runtime, with the Lua scripts they need pinned by SHA1.
//
// The output is built with github.com/dave/jennifer, gofmt'd, and
// byte-for-byte deterministic: the same spec always gives the same file.
package gen

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/dave/jennifer/jen"
	"golang.org/x/tools/imports"

	"github.com/lockgen/lockgen/internal/gotypes"
	"github.com/lockgen/lockgen/internal/spec"
)

// runtimePath is the import path of the runtime the generated code uses,
// imported as runtimeName, and implPath that of the package with the
// runtime's names for generated code only (definitions, scripts,
// constructors), imported as implName.
const (
	runtimePath = "github.com/lockgen/lockgen/runtime"
	runtimeName = "lockrt"
	implPath    = "github.com/lockgen/lockgen/runtime/lockimpl"
	implName    = "lockimpl"
)

// RuntimeAPI is the version of the runtime API the generated code is
// written for. Generated files pin it by referring to lockimpl's
// GeneratedCodeVersion<RuntimeAPI> constant. (Version 1 was pinned in
// package runtime, before the names for generated code moved to
// runtime/lockimpl.)
const RuntimeAPI = 3

// Options configure Generate.
type Options struct {
	// Dir is the spec's directory, where the generated file goes. Named
	// param types are resolved from here, as the go command in Dir would
	// resolve them. Empty means the directory of the spec's File.
	Dir string
}

// File is a generated file.
type File struct {
	Name    string // relative to the spec's directory
	Content []byte
}

// Generate returns the Go files for s. Problems with the spec itself (a
// param or payload type that does not resolve, a param name
// that cannot be a Go parameter) are returned together as
// spec.Diagnostics; any other error is wrapped.
func Generate(s *spec.Spec, opts Options) ([]File, error) {
	if opts.Dir == "" {
		opts.Dir = filepath.Dir(s.File)
	}
	g, err := check(s, opts)
	if err != nil {
		return nil, err
	}
	scripts, err := loadScripts(g.scriptNames(), sourceOf)
	if err != nil {
		return nil, err
	}
	g.scripts = scripts

	path := ""
	if g.hasNamedParams() || g.hasNamedPayloads() {
		// The package's own import path matters only when a param or
		// payload type lives in it: it must not import itself.
		if path, err = gotypes.ImportPath(opts.Dir); err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
	}
	var f *jen.File
	if path != "" {
		f = jen.NewFilePathName(path, s.Package)
	} else {
		f = jen.NewFile(s.Package)
	}
	g.render(f)
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil { // Render gofmts the source
		return nil, fmt.Errorf("gen: rendering %s: %w", s.Output, err)
	}
	// Group the imports as goimports does: the standard library first.
	src, err := imports.Process(s.Output, buf.Bytes(), &imports.Options{FormatOnly: true, Comments: true, TabIndent: true, TabWidth: 8})
	if err != nil {
		return nil, fmt.Errorf("gen: formatting %s: %w", s.Output, err)
	}
	return []File{{Name: s.Output, Content: src}}, nil
}

// Check reports the problems Generate finds in a spec beyond those
// spec.Parse finds: param and payload types that do not resolve, param
// names that cannot be Go parameters. It is for a spec that
// spec.ParsePartial read with problems, so that one run reports the
// problems of both phases; objects whose parts did not parse are checked
// as far as they did (a param without a type is skipped). Problems are
// returned as spec.Diagnostics; any other error is wrapped.
func Check(s *spec.Spec, opts Options) error {
	_, err := check(s, opts)
	return err
}

// check collects the sections of s and resolves their types.
func check(s *spec.Spec, opts Options) (*generator, error) {
	if opts.Dir == "" {
		opts.Dir = filepath.Dir(s.File)
	}
	g := &generator{spec: s, opts: opts, idents: map[string]bool{}}
	g.sections = newSections()
	for _, sec := range g.sections {
		sec.collect(g)
	}
	if err := g.resolveParams(); err != nil {
		return nil, err
	}
	if len(g.diags) > 0 {
		g.diags.Sort()
		return nil, g.diags
	}
	return g, nil
}

// renderers holds the renderer of each section of the kind table, by
// section name ("locks"): each renderer's file registers its own
// (registerSection, from an init function), so a new kind adds its file
// and nothing here.
var renderers = map[string]func() section{}

// registerSection makes mk the renderer of a section of spec.Kinds. It
// panics when the section has one already.
func registerSection(name string, mk func() section) {
	if renderers[name] != nil {
		panic("gen: two renderers for section " + name)
	}
	renderers[name] = mk
}

// newSections returns a renderer per row of spec.Kinds, in its order. A
// row without one panics: TestSectionPerKind catches it first.
func newSections() []section {
	out := make([]section, len(spec.Kinds))
	for i, k := range spec.Kinds {
		mk := renderers[k.Section]
		if mk == nil {
			panic("gen: no renderer for section " + k.Section + " (see CONTRIBUTING.md, Adding a kind of object)")
		}
		out[i] = mk()
	}
	return out
}

// generator holds the state of one Generate.
type generator struct {
	spec     *spec.Spec
	opts     Options
	diags    spec.Diagnostics
	sections []section
	idents   map[string]bool // package-level identifiers taken by objects
	scripts  []script        // the scripts the sections use, sorted by name
}

// section generates the objects of one section of a spec (locks,
// semaphores, ...), each in a file of its own.
type section interface {
	// collect checks the section's objects, reporting problems with
	// g.errorAt, and keeps what it will render.
	collect(g *generator)
	// params returns the key params of the section's objects.
	params() []*param
	// scripts returns the names of the templates the section uses.
	scripts() []string
	// render writes the section's types, constructors and definitions.
	render(g *generator, f *jen.File)
}

// ident returns the lower-camel identifier an object's package-level
// variables are named after, unique in the file (Order and ORDER are
// both "order": the second becomes "order2").
func (g *generator) ident(name string) string {
	ident := lowerCamel(name)
	for i := 2; g.idents[ident]; i++ {
		ident = fmt.Sprintf("%s%d", lowerCamel(name), i)
	}
	g.idents[ident] = true
	return ident
}

// errorAt records a problem with the spec.
func (g *generator) errorAt(pos spec.Pos, hint, format string, args ...any) {
	g.diags = append(g.diags, spec.Diagnostic{Pos: pos, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// sourceName is how the generated code names its spec.
func (g *generator) sourceName() string {
	return filepath.Base(g.spec.File)
}

// render writes the whole file.
func (g *generator) render(f *jen.File) {
	f.ImportAlias(runtimePath, runtimeName)
	f.ImportAlias(implPath, implName)
	for _, p := range g.namedParamPackages() {
		f.ImportName(p.path, p.name)
	}
	f.HeaderComment("Code generated by lockgen. DO NOT EDIT.")
	f.HeaderComment("source: " + g.sourceName())

	f.Add(comment(fmt.Sprintf("This file was generated for lockgen runtime API version %d; if the line below\n"+
		"fails to compile, regenerate it with the lockgen version in your go.mod.", RuntimeAPI)))
	f.Const().Id("_").Op("=").Qual(implPath, fmt.Sprintf("GeneratedCodeVersion%d", RuntimeAPI))

	for _, sec := range g.sections {
		sec.render(g, f)
	}
	if len(g.scripts) > 0 {
		g.renderScripts(f)
	}
}
