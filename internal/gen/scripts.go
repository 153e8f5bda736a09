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

// script is one of the runtime's Lua scripts a generated file pins: its
// source (checked when the file is generated) and SHA1.
type script struct {
	name   string // the file name in templates/, without ".lua"
	source string
	sha1   string // hex
}

// pinnedVar names the generated file's lockimpl.Pinned: the runtime's
// scripts, checked against the SHA1s the file was generated against.
const pinnedVar = "lockgenScripts"

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
		scripts = append(scripts, script{name: name, source: src, sha1: ScriptSHA1(src)})
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

// renderScripts writes the pins of the scripts the file uses and Preload.
func (g *generator) renderScripts(f *jen.File) {
	pins := make([]jen.Code, 0, len(g.scripts))
	for _, s := range g.scripts {
		pins = append(pins, jen.Lit(s.name).Op(":").Lit(s.sha1))
	}
	f.Add(comment(pinnedVar + " are the lockgen runtime's Lua scripts this file uses, pinned to the\n" +
		"SHA1s it was generated against: a runtime whose scripts differ fails\n" +
		"every call of these objects, and Preload, with lockrt.ErrScriptMismatch\n" +
		"(regenerate the file with the lockgen version of your go.mod)."))
	f.Var().Id(pinnedVar).Op("=").Qual(implPath, "Pin").Call(jen.Qual(implPath, "Pins").Custom(multiline, pins...))

	f.Add(comment("Preload loads every Lua script of this package on every primary of c's\n" +
		"Redis, so that first calls need no extra round trip; it returns\n" +
		"lockrt.ErrScriptMismatch at once when the runtime's scripts are not the\n" +
		"ones this file was generated against."))
	f.Func().Id("Preload").Params(
		jen.Id("ctx").Qual("context", "Context"),
		jen.Id("c").Op("*").Qual(runtimePath, "Client"),
	).Error().Block(
		jen.Return(jen.Qual(implPath, "Preload").Call(jen.Id("ctx"), jen.Id("c"), jen.Id(pinnedVar).Dot("All").Call().Op("..."))),
	)
}
