package spec

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lockgen/lockgen/internal/keys"
	"go.yaml.in/yaml/v3"
)

// This file holds what reading every section's objects shares: an
// object's name and common fields, keys and params, identities; each
// kind's file reads its own fields.

// object reads a declaration's name and the fields every object has. It
// returns ok false when the declaration is not a mapping.
func (p *parser) object(k *Kind, e entry) (Object, *fields, bool) {
	kind := k.Noun
	o := Object{Name: e.name, Section: k.Section, Pos: p.pos(e.key)}
	what := kind + " " + e.name
	switch first, dup := p.names[e.name]; {
	case !isExported(e.name):
		p.errorf(e.key, nameHint(e.name), "%s name %q is not an exported Go identifier", kind, e.name)
		what = fmt.Sprintf("%s %q", kind, e.name)
	case dup:
		p.errorf(e.key, fmt.Sprintf("first declared as a %s at line %d; names are unique across all sections", first.kind, first.pos.Line), "duplicate name %s", e.name)
	default:
		p.names[e.name] = declared{kind: kind, pos: o.Pos}
	}
	if e.val.Kind != yaml.MappingNode {
		if isNull(e.val) {
			p.errorf(e.key, `every object needs a key, e.g. `+e.name+`: { key: "`+strings.ToLower(e.name)+`:{id}", params: { id: string } }`, "%s has no fields", what)
		} else {
			p.errorf(e.at, "", "%s must be a mapping of fields, not %s", what, describe(e.val))
		}
		return o, nil, false
	}
	f := p.fieldsOf(e.val, what, e.key, k.FieldNames())
	o.Fields = make(map[string]Pos, len(f.list))
	for _, fe := range f.list {
		o.Fields[fe.name] = p.pos(fe.at)
	}
	if v, _, ok := f.str("description"); ok {
		o.Description = strings.TrimSpace(v)
	}
	if v, n, ok := f.str("id"); ok {
		if isExported(v) {
			o.ID = v
		} else {
			p.errorf(n, nameHint(v)+"; an id is the name the object's keys carry, usually its old name", "%s: id %q is not an exported Go identifier", what, v)
		}
	}
	if k.Keyless {
		o.Key = Key{Literals: []string{""}} // namespace:{Name:}
	} else {
		o.Key = p.key(f)
	}
	return o, f, true
}

// nameHint says how to make s an exported Go identifier.
func nameHint(s string) string {
	if r, size := utf8.DecodeRuneInString(s); keys.IsIdent(s) && unicode.IsLower(r) {
		return fmt.Sprintf("start it with an upper-case letter: %s", string(unicode.ToUpper(r))+s[size:])
	}
	return "names are exported Go identifiers, e.g. Order"
}

// checkIdentities reports two objects whose keys would carry the same
// identity: an id equal to another object's id, or to the name of an
// object without id. Names are unique already, so only ids can clash.
func (p *parser) checkIdentities(s *Spec) {
	all := s.Objects()
	slices.SortFunc(all, func(a, b Obj) int { return comparePos(a.Common().Pos, b.Common().Pos) })
	seen := map[string]*Object{}
	for _, x := range all {
		o := x.Common()
		first, dup := seen[o.Identity()]
		if dup && first.ID == "" && o.ID == "" {
			continue // a duplicate name, reported as such
		}
		if !dup {
			seen[o.Identity()] = o
			continue
		}
		at, other := o, first
		if o.ID == "" { // the clash is the earlier object's id
			at, other = first, o
		}
		p.errorAt(at.FieldPos("id"), fmt.Sprintf("%s at line %d has the same keys; ids are unique and differ from the other objects' names", describeObj(other), other.Pos.Line),
			"%s: id %s is also the key identity of %s", describeObj(at), at.ID, describeObj(other))
	}
}

// describeObj names an object for messages: "lock Order".
func describeObj(o *Object) string {
	if k := KindOf(o.Section); k != nil {
		return k.Noun + " " + o.Name
	}
	return o.Name
}

// param is a declared param before it is matched with a placeholder.
type param struct {
	Param
	name *yaml.Node
	used bool
}

// key reads the key and params fields and matches placeholders with params.
func (p *parser) key(f *fields) Key {
	var k Key
	params, paramsOK := p.params(f)
	e, ok := f.get("key")
	if !ok {
		f.missing("key", `every object needs a key pattern, e.g. key: "order:{orderID}"`)
		return k
	}
	if e.val.Kind == yaml.MappingNode && e.val.Style&yaml.FlowStyle != 0 {
		p.errorf(e.at, `quote a pattern that starts with '{': key: "{id}"`, "%s: key must be a string, not a mapping", f.what)
		return k
	}
	pattern, n, ok := f.str("key")
	if !ok {
		return k
	}
	k.Pattern, k.Pos = pattern, p.pos(n)
	pat, err := keys.ParsePattern(pattern)
	if err != nil {
		for _, err := range unjoin(err) {
			var pe *keys.PatternError
			if errors.As(err, &pe) {
				p.errorAt(p.offsetPos(n, pe.Offset), pe.Hint, "%s: %s", f.what, pe.Msg)
			} else {
				p.errorf(n, "", "%s: %s", f.what, err)
			}
		}
		return k
	}
	k.Literals = pat.Literals
	if !paramsOK {
		return k
	}
	byName := map[string]*param{}
	var names []string
	for _, pm := range params {
		byName[pm.Name] = pm
		names = append(names, pm.Name)
	}
	missing := false
	for i, ph := range pat.Placeholders {
		pm := byName[ph]
		if pm == nil {
			hint := fmt.Sprintf("declare it, e.g. params: { %s: string }", ph)
			if s := suggest(ph, names); s != "" {
				hint = fmt.Sprintf("did you mean param %q?", s)
			}
			p.errorAt(p.offsetPos(n, pat.Offsets[i]), hint, "%s: placeholder {%s} has no param", f.what, ph)
			missing = true
			continue
		}
		pm.used = true
		k.Params = append(k.Params, pm.Param)
	}
	for _, pm := range params {
		if !pm.used {
			p.errorf(pm.name, fmt.Sprintf("use it in the key as {%s}, or remove it", pm.Name), "%s: param %s is not used in the key", f.what, pm.Name)
		}
	}
	if missing {
		k.Params = nil
	}
	return k
}

// unjoin returns the errors joined in err.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// params reads the params field. It returns the params whose names are
// Go identifiers, in document order, even when their types are bad, so
// that they still match their placeholders; ok is false when params is
// not a mapping, so matching makes no sense.
func (p *parser) params(f *fields) (_ []*param, ok bool) {
	e, ok := f.get("params")
	if !ok {
		return nil, !f.has("params")
	}
	if e.val.Kind != yaml.MappingNode {
		p.errorf(e.at, "for example params: { orderID: int64 }", "%s: params must be a mapping from names to types, not %s", f.what, describe(e.val))
		return nil, false
	}
	var out []*param
	for _, pe := range p.entries(e.val, f.what+": params") {
		switch {
		case pe.name == "_":
			p.errorf(pe.key, "params become Go parameters; pick another name", "%s: param name _ is blank", f.what)
			continue
		case keys.IsIdent(pe.name):
		case token.IsKeyword(pe.name):
			p.errorf(pe.key, "params become Go parameters; pick another name", "%s: param name %q is a Go keyword", f.what, pe.name)
			continue
		default:
			p.errorf(pe.key, "params become Go parameters, e.g. orderID", "%s: param name %q is not a Go identifier", f.what, pe.name)
			continue
		}
		pm := &param{Param: Param{Name: pe.name, Pos: p.pos(pe.at)}, name: pe.key}
		out = append(out, pm)
		switch {
		case isNull(pe.val):
			p.errorf(pe.at, paramTypesHint, "%s: param %s has no type", f.what, pe.name)
			continue
		case pe.val.Kind != yaml.ScalarNode:
			p.errorf(pe.at, paramTypesHint, "%s: param %s needs a type, not %s", f.what, pe.name, describe(pe.val))
			continue
		}
		t, hint := parseParamType(pe.val.Value)
		if hint != "" {
			p.errorf(pe.at, hint, "%s: param %s has unsupported type %q", f.what, pe.name, pe.val.Value)
			continue
		}
		pm.Type = t
	}
	return out, true
}

// parseParamType parses a param's type, or returns a hint saying what is
// wrong with it.
func parseParamType(s string) (ParamType, string) {
	if contains(BasicParamTypes, s) {
		return ParamType{Basic: s}, ""
	}
	if path, name, ok := splitQualified(s); ok {
		switch {
		case !validImportPath(path):
			return ParamType{}, fmt.Sprintf("%q is not an import path", path)
		case !isExported(name):
			return ParamType{}, fmt.Sprintf("%q is not an exported type name", name)
		}
		return ParamType{ImportPath: path, TypeName: name}, ""
	}
	if g := suggest(s, BasicParamTypes); g != "" {
		return ParamType{}, fmt.Sprintf("did you mean %q?", g)
	}
	if isExported(s) {
		return ParamType{}, fmt.Sprintf(`a named type needs its import path, e.g. "example.com/ids.%s"`, s)
	}
	return ParamType{}, paramTypesHint
}

const paramTypesHint = `param types are int, int8…int64, uint, uint8…uint64, string, or a named type like "example.com/ids.TenantID"`

// splitQualified splits "import/path.Name" at the last '.' after the last
// '/'.
func splitQualified(s string) (path, name string, ok bool) {
	slash := strings.LastIndexByte(s, '/')
	dot := strings.LastIndexByte(s[slash+1:], '.')
	if dot < 0 {
		return "", "", false
	}
	dot += slash + 1
	return s[:dot], s[dot+1:], true
}

// validImportPath reports whether path is a plausible Go import path:
// '/'-separated elements of ASCII letters, digits and "-._~+", none
// empty, "." or "..".
func validImportPath(path string) bool {
	if path == "" {
		return false
	}
	for elem := range strings.SplitSeq(path, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
		for _, r := range elem {
			if !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-._~+", r))) {
				return false
			}
		}
	}
	return true
}

// offsetPos returns the position of byte offset off in the value of
// scalar n. It is exact for values written on one line, plain or quoted,
// without escapes before off; otherwise it is the position of the value.
func (p *parser) offsetPos(n *yaml.Node, off int) Pos {
	pos := p.pos(n)
	if off <= 0 || off > len(n.Value) || n.Line < 1 || n.Column < 1 ||
		n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return pos
	}
	var line []byte
	if lines := p.lines(); n.Line <= len(lines) {
		line = lines[n.Line-1]
	}
	for i := 1; i < n.Column && len(line) > 0; i++ {
		_, size := utf8.DecodeRune(line)
		line = line[size:]
	}
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0
	if quoted {
		if len(line) == 0 || line[0] != '"' && line[0] != '\'' {
			return pos
		}
		line = line[1:]
		pos.Col++
	}
	if !bytes.HasPrefix(line, []byte(n.Value[:off])) {
		return p.pos(n)
	}
	pos.Col += utf8.RuneCountInString(n.Value[:off])
	return pos
}
