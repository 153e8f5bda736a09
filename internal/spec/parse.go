package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockgen/lockgen/internal/keys"
	"go.yaml.in/yaml/v3"
)

// Default values of fields a spec may leave out.
const (
	DefaultLease         = 30 * time.Second // defaults.lease
	DefaultWait          = 10 * time.Second // defaults.wait
	DefaultLatchExpire   = 24 * time.Hour   // latches: expire
	DefaultMaxDeliveries = 5                // queues: reliable.maxDeliveries
	DefaultCodec         = "json"           // queues: codec
)

// Codecs lists the queue payload codecs this lockgen knows by name; a
// custom codec is named by import path instead ("example.com/codecs.Msgpack").
var Codecs = []string{"json", "protobuf", "bytes", "string"}

// LimiterAlgorithms lists the limiter algorithms, in the order the docs give them.
var LimiterAlgorithms = []string{GCRA, TokenBucket, SlidingWindow}

// LimiterScopes lists the limiter scopes.
var LimiterScopes = []string{ScopeOverall, ScopePerClient}

// BasicParamTypes lists the predeclared Go types a key param may have.
var BasicParamTypes = []string{
	"int", "int8", "int16", "int32", "int64",
	"uint", "uint8", "uint16", "uint32", "uint64",
	"string",
}

// Load reads and parses the spec file at path, which becomes Spec.File and
// the file of every position (see Parse). It returns the error of reading
// the file, wrapped, or Diagnostics.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading spec: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates a spec. file names the spec in positions and
// becomes Spec.File. When the spec has problems, Parse returns a nil Spec
// and an error of type Diagnostics listing all of them, sorted by
// position; otherwise it returns the Spec and nil.
func Parse(file string, data []byte) (*Spec, error) {
	s, ds := ParsePartial(file, data)
	if len(ds) > 0 {
		return nil, ds
	}
	return s, nil
}

// ParsePartial parses a spec as Parse does, but returns the spec as far
// as it could be read also when it has problems, with the problems
// (sorted), so that later checks, such as resolving param and payload
// types, can report theirs in the same run. In a spec with problems, a
// field in error keeps its default or zero value (a param with a bad type
// has no Type, an object whose key has a placeholder without a param has
// no Key.Params); the spec is nil only when there is nothing to read: the
// YAML does not parse into a mapping, or its version is a later one.
func ParsePartial(file string, data []byte) (*Spec, Diagnostics) {
	p := &parser{file: file, src: data, names: map[string]declared{}, reported: map[Diagnostic]bool{}}
	s := p.parse()
	p.diags.Sort()
	return s, p.diags
}

// LoadPartial reads the spec file at path and parses it with
// ParsePartial. It returns the error of reading the file, wrapped, or
// the diagnostics as an error of type Diagnostics.
func LoadPartial(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading spec: %w", err)
	}
	s, ds := ParsePartial(path, data)
	if len(ds) > 0 {
		return s, ds
	}
	return s, nil
}

// parser holds the state of one Parse.
type parser struct {
	file     string
	src      []byte
	srcLines [][]byte // see lines
	diags    Diagnostics
	names    map[string]declared // object names seen so far

	reported map[Diagnostic]bool

	// budget is how many more mapping entries to read; see entries.
	budget     int
	overBudget bool
	// budgetGiven and entriesRead count, for tests, the budget at the
	// start and the entries read.
	budgetGiven, entriesRead int
}

// declared is an object name's first declaration.
type declared struct {
	kind string
	pos  Pos
}

func (p *parser) pos(n *yaml.Node) Pos {
	return Pos{File: p.file, Line: max(n.Line, 1), Col: max(n.Column, 1)}
}

func (p *parser) errorAt(pos Pos, hint, format string, args ...any) {
	d := Diagnostic{Pos: pos, Msg: fmt.Sprintf(format, args...), Hint: hint}
	if p.reported[d] {
		return // found again through an alias
	}
	p.reported[d] = true
	p.diags = append(p.diags, d)
}

func (p *parser) errorf(n *yaml.Node, hint, format string, args ...any) {
	p.errorAt(p.pos(n), hint, format, args...)
}

var (
	yamlLine      = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
)

// parserErrors are the messages of the YAML library's parser (not its
// scanner); it reports their lines counting from 0.
var parserErrors = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// syntaxError reports an error of the YAML library at its line, or at a
// better position when the message allows finding one.
func (p *parser) syntaxError(err error) {
	msg, pos, hint := err.Error(), Pos{File: p.file, Line: 1, Col: 1}, ""
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		msg = m[2]
		if n, err := strconv.Atoi(m[1]); err == nil && n >= 1 && n < 1<<30 {
			pos.Line = n
			if contains(parserErrors, msg) {
				pos.Line++
			}
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		if at := p.find("*" + m[1]); at.Line > 0 {
			pos = at
		}
		hint = "define it first with &" + m[1]
	}
	if strings.Contains(msg, "tab character") || strings.HasPrefix(msg, "found character that cannot start any token") {
		if at := p.findTabIndent(); at.Line > 0 {
			pos, hint = at, "indent YAML with spaces, not tabs"
		}
	}
	if pos.Line > len(p.lines())+1 {
		pos.Line = len(p.lines()) + 1
	}
	p.errorAt(pos, hint, "invalid YAML: %s", msg)
}

// find returns the position of the first occurrence of s in the source,
// or a zero Pos.
func (p *parser) find(s string) Pos {
	for i, line := range p.lines() {
		if j := bytes.Index(line, []byte(s)); j >= 0 {
			return Pos{File: p.file, Line: i + 1, Col: utf8.RuneCount(line[:j]) + 1}
		}
	}
	return Pos{}
}

// findTabIndent returns the position of the first tab in the indentation
// of a line, or a zero Pos.
func (p *parser) findTabIndent() Pos {
	for i, line := range p.lines() {
		indent := line[:len(line)-len(bytes.TrimLeft(line, " \t"))]
		if j := bytes.IndexByte(indent, '\t'); j >= 0 {
			return Pos{File: p.file, Line: i + 1, Col: j + 1}
		}
	}
	return Pos{}
}

// lines returns the source split into lines without line breaks.
func (p *parser) lines() [][]byte {
	if p.srcLines == nil {
		p.srcLines = bytes.Split(p.src, []byte("\n"))
		for i, l := range p.srcLines {
			p.srcLines[i] = bytes.TrimSuffix(l, []byte("\r"))
		}
	}
	return p.srcLines
}

func (p *parser) parse() *Spec {
	dec := yaml.NewDecoder(bytes.NewReader(p.src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorAt(Pos{File: p.file, Line: 1, Col: 1}, "start with: version: 1", "spec is empty")
		} else {
			p.syntaxError(err)
		}
		return nil
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		p.errorAt(Pos{File: p.file, Line: max(next.Line, 1), Col: 1}, "remove the '---' and what follows, or merge it into the first document", "spec has more than one YAML document")
	} else if !errors.Is(err, io.EOF) {
		p.syntaxError(err)
	}
	p.budget = 10000 + 10*countNodes(&doc)
	p.budgetGiven = p.budget
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			p.errorAt(Pos{File: p.file, Line: 1, Col: 1}, "start with: version: 1", "spec is empty")
			return nil
		}
		root = resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		if isNull(root) {
			p.errorAt(p.pos(root), "start with: version: 1", "spec is empty")
		} else {
			p.errorf(root, "start with: version: 1", "spec must be a mapping of fields, not %s", describe(root))
		}
		return nil
	}

	s := &Spec{File: p.file, Version: Version, Output: DefaultOutput, Defaults: Defaults{Lease: DefaultLease, Wait: DefaultWait}}

	// A spec of a later version is not read further: its fields may
	// mean other things.
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := resolve(root.Content[i]), resolve(root.Content[i+1])
		if n, err := strconv.Atoi(v.Value); k.Value == "version" && v.ShortTag() == "!!int" && err == nil && n > Version {
			p.errorf(v, fmt.Sprintf("this lockgen reads version %d; upgrade lockgen", Version), "spec version %d is not supported", n)
			return nil
		}
	}
	f := p.fieldsOf(root, "", root, topFields())
	s.Fields = map[string]Pos{}
	for _, e := range f.list {
		s.Fields[e.name] = p.pos(e.at)
	}
	if e, ok := f.m["version"]; ok {
		if v, ok := f.integer("version", 0); ok && v != Version {
			p.errorf(e.at, "write version: 1", "spec version %d is not supported", v)
		}
	} else {
		f.missing("version", "start with: version: 1")
	}
	if v, n, ok := f.str("package"); ok {
		if !keys.IsIdent(v) || v == "_" {
			p.errorf(n, "use a short lower-case name, e.g. package: shoplocks", "package %q is not a valid Go package name", v)
		}
		s.Package = v
	} else {
		f.missing("package", "name the Go package of the generated file, e.g. package: shoplocks")
	}
	if v, n, ok := f.str("namespace"); ok {
		if err := keys.ValidNamespace(v); err != nil {
			p.errorf(n, "the namespace starts every key, e.g. namespace: shop", "%s", err)
		}
		s.Namespace = v
	} else {
		f.missing("namespace", "the namespace starts every key, e.g. namespace: shop")
	}
	if v, n, ok := f.str("output"); ok {
		if msg := checkOutput(v); msg != "" {
			p.errorf(n, `for example output: lockgen.gen.go`, "output %q %s", v, msg)
		}
		s.Output = v
	}
	if e, ok := f.get("defaults"); ok {
		if e.val.Kind != yaml.MappingNode {
			p.errorf(e.at, "for example defaults: { lease: 30s, wait: 10s }", "defaults must be a mapping, not %s", describe(e.val))
		} else {
			d := p.fieldsOf(e.val, "defaults", e.key, []string{"lease", "wait"})
			if v, ok := d.duration("lease", false); ok {
				s.Defaults.Lease = v
			}
			if v, ok := d.duration("wait", false); ok {
				s.Defaults.Wait = v
			}
		}
	}

	// Sections, in document order so a duplicate name is reported at
	// its second declaration.
	for _, e := range f.list {
		sec := KindOf(e.name)
		if sec == nil || isNull(e.val) {
			continue
		}
		if e.val.Kind != yaml.MappingNode {
			p.errorf(e.at, fmt.Sprintf("map each name to its fields, e.g. %s", sec.Example), "%s must be a mapping from names to objects, not %s", e.name, describe(e.val))
			continue
		}
		for _, o := range p.entries(e.val, e.name) {
			sec.parse(p, s, sec, o)
		}
	}
	p.checkIdentities(s)
	p.checkScheduleTargets(s)
	sortObjects(s)
	return s
}

// checkOutput returns what is wrong with an output file name, or "".
func checkOutput(name string) string {
	switch {
	case strings.ContainsAny(name, `/\`):
		return "must be a file name without directories"
	case !strings.HasSuffix(name, ".go"):
		return `must end in ".go"`
	case strings.HasSuffix(name, "_test.go"):
		return "would be a test file"
	case strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"):
		return "would be ignored by the go command (it starts with '.' or '_')"
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return "contains blanks or control characters"
	}
	return ""
}

// isExported reports whether s is an exported Go identifier.
func isExported(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return keys.IsIdent(s) && unicode.IsUpper(r)
}

// countNodes counts the nodes of a document, not following aliases.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}
