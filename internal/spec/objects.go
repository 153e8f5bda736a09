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

// This file reads the objects of the five sections.

func parseLock(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	l := &Lock{Object: o, Kind: Reentrant, KindPos: o.Pos, Lease: s.Defaults.Lease, Renew: true, Wait: s.Defaults.Wait}
	kinds := make([]string, len(LockKinds))
	for i, k := range LockKinds {
		kinds[i] = string(k)
	}
	if v, n, ok := f.oneOf("kind", kinds); ok {
		l.Kind, l.KindPos = LockKind(v), p.pos(n)
	}
	f.hold(&l.Lease, &l.Renew, &l.Wait)
	if l.Kind == Leader {
		// Campaign waits as long as its context allows, and leading ends
		// only by loss or Resign: a leader's lease is always renewed.
		if r, ok := f.get("wait"); ok {
			p.errorf(r.at, "Campaign waits as long as its context allows; leave wait out", "%s: wait is not for kind leader", f.what)
		}
		if r, ok := f.get("renew"); ok && !l.Renew {
			p.errorf(r.at, "a leader's lease is renewed while it leads; leave renew out", "%s: renew: false is not for kind leader", f.what)
		}
		l.Wait, l.Renew = 0, true
	}
	if r, ok := f.get("sync"); ok {
		switch {
		case r.val.Kind != yaml.MappingNode:
			p.errorf(r.at, "for example sync: { replicas: 1, timeout: 1s }", "%s: sync must be a mapping, not %s", f.what, describe(r.val))
		case l.Kind == RedLock:
			p.errorf(r.at, "a RedLock's nodes are independent deployments; sync is for a lock on one deployment with replicas", "%s: sync is not for kind redlock", f.what)
		default:
			sf := p.fieldsOf(r.val, f.what+": sync", r.key, k.Extra["sync"])
			l.Sync = &Sync{Timeout: DefaultSyncTimeout}
			if v, ok := sf.integer("replicas", 1); ok {
				l.Sync.Replicas = v
			} else {
				sf.missing("replicas", "how many replicas must have the lock before Lock returns, e.g. replicas: 1")
			}
			if v, ok := sf.duration("timeout", false); ok {
				l.Sync.Timeout = v
			}
		}
	}
	k.append(s, l)
}

func parseSemaphore(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	m := &Semaphore{Object: o, Lease: s.Defaults.Lease, Renew: true, Wait: s.Defaults.Wait}
	if v, ok := f.integer("permits", 1); ok {
		m.Permits = v
	} else {
		f.missing("permits", "how many may hold it at once, e.g. permits: 4")
	}
	f.hold(&m.Lease, &m.Renew, &m.Wait)
	k.append(s, m)
}

func parseLatch(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	l := &Latch{Object: o, Expire: DefaultLatchExpire}
	if v, ok := f.integer("count", 1); ok {
		l.Count = v
	} else {
		f.missing("count", "how many count-downs open the latch, e.g. count: 3")
	}
	if v, ok := f.duration("expire", false); ok {
		l.Expire = v
	}
	k.append(s, l)
}

func parseLimiter(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	l := &Limiter{Object: o, Scope: ScopeOverall}
	if v, _, ok := f.oneOf("algorithm", LimiterAlgorithms); ok {
		l.Algorithm = v
	} else {
		f.missing("algorithm", "algorithm is one of "+strings.Join(LimiterAlgorithms, " | "))
	}
	if v, ok := f.integer("rate", 1); ok {
		l.Rate = v
	} else {
		f.missing("rate", "how many per period, e.g. rate: 100")
	}
	if v, ok := f.duration("per", false); ok {
		l.Per = v
	} else {
		f.missing("per", "the period of the rate, e.g. per: 1m")
	}
	if v, ok := f.integer("burst", 0); ok {
		l.Burst = v
		if l.Algorithm == SlidingWindow && v > 0 {
			p.errorf(f.m["burst"].at, "remove burst, or use gcra or token-bucket", "%s: a sliding-window limiter has no burst", f.what)
		}
	}
	if v, _, ok := f.oneOf("scope", LimiterScopes); ok {
		l.Scope = v
	}
	if v, ok := f.duration("idleTTL", false); ok {
		l.IdleTTL = v
	}
	k.append(s, l)
}

func parseQueue(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	q := &Queue{Object: o, Codec: DefaultCodec}
	if v, n, ok := f.str("payload"); ok {
		q.PayloadPos = p.pos(n)
		if t, hint := parsePayload(v); hint != "" {
			p.errorf(n, hint, "%s: payload %q is not a type lockgen can use", f.what, v)
		} else {
			q.Payload = t
		}
	} else {
		f.missing("payload", "the Go type of an item, e.g. payload: github.com/acme/shop/orders.CloseRequest")
	}
	parseCodec(p, f, q)
	if v, ok := f.boolean("delay"); ok {
		q.Delay = v
	}
	if r, ok := f.get("reliable"); ok {
		if r.val.Kind != yaml.MappingNode {
			p.errorf(r.at, "for example reliable: { visibility: 30s, maxDeliveries: 5 }", "%s: reliable must be a mapping, not %s", f.what, describe(r.val))
		} else {
			rf := p.fieldsOf(r.val, f.what+": reliable", r.key, k.Extra["reliable"])
			q.Reliable = &Reliable{MaxDeliveries: DefaultMaxDeliveries}
			if v, ok := rf.duration("visibility", false); ok {
				q.Reliable.Visibility = v
			} else {
				rf.missing("visibility", "how long a taken item stays hidden before it is delivered again, e.g. visibility: 30s")
			}
			if v, ok := rf.integer("maxDeliveries", 1); ok {
				q.Reliable.MaxDeliveries = v
			}
			if v, ok := rf.duration("dedupe", false); ok {
				q.Unique = v // unique:'s first spelling
			}
		}
	}
	if e, ok := f.get("unique"); ok {
		if v, ok := f.duration("unique", false); ok {
			switch {
			case q.Reliable == nil:
				p.errorf(e.key, "add reliable: { visibility: 30s }, or remove unique", "%s: unique needs a reliable queue (Enqueue is a reliable queue's)", f.what)
			case q.Unique != 0:
				p.errorf(e.key, "keep unique: and remove reliable.dedupe (its first spelling)", "%s: unique and reliable.dedupe both set the unique window", f.what)
			default:
				q.Unique = v
			}
		}
	}
	if r, ok := f.get("retention"); ok {
		switch {
		case r.val.Kind != yaml.MappingNode:
			p.errorf(r.at, "for example retention: { for: 1h, max: 1000 }", "%s: retention must be a mapping, not %s", f.what, describe(r.val))
		case q.Reliable == nil:
			p.errorf(r.key, "add reliable: { visibility: 30s }, or remove retention", "%s: retention needs a reliable queue (it keeps acknowledged items)", f.what)
		default:
			rf := p.fieldsOf(r.val, f.what+": retention", r.key, k.Extra["retention"])
			q.Retention = &Retention{Max: DefaultRetainMax}
			if v, ok := rf.duration("for", false); ok {
				q.Retention.For = v
			} else {
				rf.missing("for", "how long an acknowledged item is kept to inspect, e.g. for: 1h")
			}
			if v, ok := rf.integer("max", 1); ok {
				q.Retention.Max = v
			}
		}
	}
	k.append(s, q)
}

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

// parsePayload parses a queue's payload type, or returns a hint saying
// what is wrong with it.
func parsePayload(s string) (PayloadType, string) {
	const want = `write "import/path.Type", string or []byte`
	switch {
	case s == "string" || s == "[]byte":
		return PayloadType{TypeName: s}, ""
	case strings.HasPrefix(s, "*"):
		return PayloadType{}, "payloads are passed by value; write the type without '*'"
	}
	path, name, ok := splitQualified(s)
	switch {
	case !ok && isExported(s):
		return PayloadType{}, fmt.Sprintf(`a named type needs its import path, e.g. "example.com/orders.%s"`, s)
	case !ok:
		return PayloadType{}, want
	case !validImportPath(path):
		return PayloadType{}, fmt.Sprintf("%q is not an import path; %s", path, want)
	case !isExported(name):
		return PayloadType{}, fmt.Sprintf("%q is not an exported type name; %s", name, want)
	}
	return PayloadType{ImportPath: path, TypeName: name}, ""
}

// parseCodec reads a queue's codec: a name from Codecs, which must suit
// the payload, or a custom codec's "import/path.Type".
func parseCodec(p *parser, f *fields, q *Queue) {
	v, n, ok := f.str("codec")
	if !ok {
		return
	}
	q.CodecPos = p.pos(n)
	if path, name, ok := splitQualified(v); ok && strings.Contains(v, "/") {
		if !validImportPath(path) || !isExported(name) {
			p.errorf(n, `a custom codec is an exported type named by import path, e.g. "example.com/codecs.Msgpack"`,
				"%s: codec %q is not a type lockgen can use", f.what, v)
			return
		}
		q.Codec, q.CustomCodec = v, &PayloadType{ImportPath: path, TypeName: name}
		return
	}
	if _, _, ok := f.oneOf("codec", Codecs); !ok {
		return
	}
	q.Codec = v
	payload := q.Payload.String()
	switch {
	case payload == "":
		// the payload's own error was reported
	case v == "bytes" && payload != "[]byte", v == "string" && payload != "string":
		want := map[string]string{"bytes": "[]byte", "string": "string"}[v]
		p.errorf(n, fmt.Sprintf("write payload: %q, or choose codec: json", want),
			"%s: codec %s carries %s payloads, not %s", f.what, v, want, payload)
	case v == "protobuf" && q.Payload.ImportPath == "":
		p.errorf(n, "name the message type protoc-gen-go generated, e.g. payload: example.com/pb.CloseRequest",
			"%s: codec protobuf needs a protobuf message payload, not %s", f.what, payload)
	}
}

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
