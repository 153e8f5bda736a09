package gen

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/dave/jennifer/jen"
	"github.com/yuin/gopher-lua/parse"

	"github.com/lockgen/lockgen/templates"
)

// script is a Lua script as emitted: its source and SHA1.
type script struct {
	name    string // the file name in templates/, without ".lua"
	source  string
	sha1    string // hex
	summary string // what its header says it does
}

// scriptVar names the lockimpl.Script variable of a script.
func scriptVar(name string) string { return snakeToCamel(name) + "Script" }

// sourceOf returns a script's source from templates.
func sourceOf(name string) (string, error) { return templates.Source(name) }

// scriptNames returns the names of the scripts the sections use, each
// once, sorted.
func (g *generator) scriptNames() []string {
	seen := map[string]bool{}
	var names []string
	for _, sec := range g.sections {
		for _, name := range sec.scripts() {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	return names
}

// loadScripts reads, checks and hashes the named scripts.
func loadScripts(names []string, source func(name string) (string, error)) ([]script, error) {
	var scripts []script
	for _, name := range names {
		src, err := source(name)
		if err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		if err := CheckScript(name, src); err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		scripts = append(scripts, script{name: name, source: src, sha1: ScriptSHA1(src), summary: templates.Summary(name, src)})
	}
	return scripts, nil
}

// ScriptSHA1 returns the SHA1 the generated code gives a script: the hex
// SHA1 of its source, which is what Redis' SCRIPT LOAD returns for it.
func ScriptSHA1(source string) string {
	sum := sha1.Sum([]byte(source))
	return hex.EncodeToString(sum[:])
}

// CheckScript reports why the Lua source of the named script cannot be
// emitted: it does not parse, or it cannot be a Go raw string literal
// whose value is exactly the source (the script's SHA1 must match what
// Redis computes from the string the runtime sends).
func CheckScript(name, src string) error {
	file := "templates/" + name + ".lua"
	switch {
	case !utf8.ValidString(src):
		return fmt.Errorf("%s is not valid UTF-8", file)
	case strings.ContainsAny(src, "`\r\x00\ufeff"):
		// A raw string cannot hold a backtick, drops carriage returns,
		// and Go source may contain neither NUL nor a byte order mark.
		return fmt.Errorf("%s contains a backtick, carriage return, NUL or byte order mark, which a Go raw string cannot hold", file)
	}
	if _, err := parse.Parse(strings.NewReader(src), file); err != nil {
		var perr *parse.Error
		if errors.As(err, &perr) {
			if perr.Pos.Line == 0 {
				return fmt.Errorf("%s: Lua %s at end of script", file, perr.Message)
			}
			return fmt.Errorf("%s:%d:%d: Lua %s near %q", file, perr.Pos.Line, perr.Pos.Column, perr.Message, perr.Token)
		}
		return fmt.Errorf("%s: Lua does not parse: %w", file, err)
	}
	return nil
}

// scriptDoc is the doc comment of a script's variable, from its header:
// it makes sense in the user's package, where lockgen's tree is not.
func scriptDoc(s script) string {
	v := scriptVar(s.name)
	if s.summary == "" {
		return fmt.Sprintf("%s is lockgen's Lua script %s.", v, s.name)
	}
	return fmt.Sprintf("%s: %s\n(lockgen's Lua script %s; the comment at the top of Source states\nits KEYS, ARGV and reply.)", v, s.summary, s.name)
}

// renderScripts writes one lockimpl.Script per script and Preload.
func (g *generator) renderScripts(f *jen.File) {
	refs := make([]jen.Code, 0, len(g.scripts)+2)
	refs = append(refs, jen.Id("ctx"), jen.Id("c"))
	for _, s := range g.scripts {
		f.Add(comment(scriptDoc(s)))
		f.Var().Id(scriptVar(s.name)).Op("=").Qual(implPath, "Script").Custom(multiline,
			field("Name", jen.Lit(s.name)),
			field("SHA1", jen.Lit(s.sha1)),
			field("Source", jen.Op("`"+s.source+"`")),
		)
		refs = append(refs, jen.Op("&").Id(scriptVar(s.name)))
	}

	f.Add(comment("Preload loads every Lua script of this package on every primary of c's\n" +
		"Redis, so that first calls need no extra round trip."))
	f.Func().Id("Preload").Params(
		jen.Id("ctx").Qual("context", "Context"),
		jen.Id("c").Op("*").Qual(runtimePath, "Client"),
	).Error().Block(
		jen.Return(jen.Qual(implPath, "Preload").Custom(jen.Options{Open: "(", Close: ")", Separator: ",", Multi: true}, refs...)),
	)
}
