// Package keys turns the key patterns of a lockgen spec into Redis keys.
//
// A pattern such as "order:{orderID}" is a run of literals and
// placeholders. The key of one object instance is
//
//	<namespace>:{<Object>:<literal0><value1><literal1>...<valueN><literalN>}
//
// where each value is escaped so that it never contains '%', ':', '{' or
// '}'. The braces make the whole instance identity the Redis Cluster hash
// tag, so every key derived from it with [Sub] (a channel, a queue, a
// timeout set) lands in the same slot, and every script touches one slot.
//
// The encoding is injective across all objects of all specs that share a
// namespace: the object name (a Go identifier, unique in a spec) follows
// the namespace and ends at the first ':', escaped values contain no ':',
// and [ParsePattern] requires a ':' in every literal between two
// placeholders, so a key decodes to exactly one (object, values) tuple.
// [Decode] is that inverse; the tests check Decode(Build(v)) == v.
package keys

import (
	"errors"
	"fmt"
	"go/token"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pattern is a parsed key pattern.
type Pattern struct {
	// Literals has one more element than Placeholders: the text before,
	// between and after them. Literals[i] precedes Placeholders[i].
	Literals []string
	// Placeholders are the parameter names in the order they appear,
	// which is also the Go argument order of the generated constructor.
	Placeholders []string
	// Offsets are the byte offsets of each placeholder's '{' in the
	// pattern, for error positions.
	Offsets []int
}

// PatternError is a problem with a key pattern; Offset is the byte offset
// in the pattern where it was found.
type PatternError struct {
	Offset int
	Msg    string
	Hint   string
}

func (e *PatternError) Error() string {
	if e.Hint == "" {
		return e.Msg
	}
	return e.Msg + " (" + e.Hint + ")"
}

// ParsePattern parses and validates a key pattern. It returns every problem
// found, each a *PatternError, joined with errors.Join.
func ParsePattern(pattern string) (*Pattern, error) {
	var errs []error
	bad := func(off int, hint, format string, args ...any) {
		errs = append(errs, &PatternError{Offset: off, Msg: fmt.Sprintf(format, args...), Hint: hint})
	}
	if pattern == "" {
		bad(0, `for example "order:{orderID}"`, "key pattern is empty")
		return nil, errors.Join(errs...)
	}
	p := &Pattern{}
	seen := map[string]bool{}
	var lit strings.Builder
	for i := 0; i < len(pattern); {
		r, size := utf8.DecodeRuneInString(pattern[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			bad(i, "", "key pattern is not valid UTF-8")
		case r == '}':
			bad(i, `placeholders look like "{name}"`, "unmatched '}' in key pattern")
		case r == '{':
			end := strings.IndexByte(pattern[i:], '}')
			if end < 0 {
				bad(i, `placeholders look like "{name}"`, "unclosed '{' in key pattern")
				i = len(pattern)
				continue
			}
			name := pattern[i+1 : i+end]
			switch {
			case token.IsKeyword(name):
				bad(i, "a placeholder becomes a Go parameter; pick another name", "placeholder {%s} is a Go keyword", name)
			case name == "_":
				bad(i, "a placeholder becomes a Go parameter; pick another name", "placeholder {_} is blank")
			case !IsIdent(name):
				bad(i, "a placeholder names a param and must be a Go identifier", "invalid placeholder %q", "{"+name+"}")
			case seen[name]:
				bad(i, "use each placeholder once", "placeholder {%s} appears twice", name)
			default:
				if len(p.Placeholders) > 0 && !strings.Contains(lit.String(), ":") {
					bad(i, "separate placeholders with ':' so every key decodes one way", "placeholder {%s} must be separated from {%s} by a literal containing ':'", name, p.Placeholders[len(p.Placeholders)-1])
				}
				seen[name] = true
			}
			p.Literals = append(p.Literals, lit.String())
			p.Placeholders = append(p.Placeholders, name)
			p.Offsets = append(p.Offsets, i)
			lit.Reset()
			i += end + 1
			continue
		case unicode.IsSpace(r) || !unicode.IsPrint(r):
			bad(i, "keys are easier to operate without blanks or control characters", "key pattern contains %q", r)
		default:
			lit.WriteRune(r)
		}
		i += size
	}
	p.Literals = append(p.Literals, lit.String())
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// IsIdent reports whether s is a Go identifier (and not a keyword).
func IsIdent(s string) bool {
	if s == "" || token.IsKeyword(s) {
		return false
	}
	for i, r := range s {
		if r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r)) {
			continue
		}
		return false
	}
	return true
}

// ValidNamespace reports a problem with a namespace, or nil. A namespace is
// one or more ASCII letters, digits, '_', '-' or '.'.
func ValidNamespace(ns string) error {
	if ns == "" {
		return errors.New("namespace is empty")
	}
	for _, r := range ns {
		if !(r == '_' || r == '-' || r == '.' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return fmt.Errorf("namespace %q may only contain ASCII letters, digits, '_', '-' and '.'", ns)
		}
	}
	return nil
}

const escaped = "%:{}"

// Escape encodes a value so it contains none of '%', ':', '{', '}'.
func Escape(v string) string {
	if !strings.ContainsAny(v, escaped) {
		return v
	}
	var b strings.Builder
	b.Grow(len(v) + 8)
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '%':
			b.WriteString("%25")
		case ':':
			b.WriteString("%3A")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ErrNotAKey is returned by Unescape and Decode for text that no call of
// Escape or Build produces.
var ErrNotAKey = errors.New("keys: not an encoded key")

// Unescape is the inverse of Escape.
func Unescape(s string) (string, error) {
	if !strings.ContainsAny(s, escaped) {
		return s, nil
	}
	if strings.ContainsAny(s, ":{}") {
		return "", ErrNotAKey
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", ErrNotAKey
		}
		switch s[i+1 : i+3] {
		case "25":
			b.WriteByte('%')
		case "3A":
			b.WriteByte(':')
		case "7B":
			b.WriteByte('{')
		case "7D":
			b.WriteByte('}')
		default:
			return "", ErrNotAKey
		}
		i += 2
	}
	return b.String(), nil
}

// Build returns the key of one object instance. literals must have one
// more element than values (see Pattern.Literals).
func Build(namespace, object string, literals []string, values ...string) string {
	n := len(namespace) + len(object) + 4
	for _, l := range literals {
		n += len(l)
	}
	for _, v := range values {
		n += len(v)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(namespace)
	b.WriteString(":{")
	b.WriteString(object)
	b.WriteByte(':')
	for i, l := range literals {
		b.WriteString(l)
		if i < len(values) {
			b.WriteString(Escape(values[i]))
		}
	}
	b.WriteByte('}')
	return b.String()
}

// Sub returns a further key of the same object instance, in the same hash
// slot as key: key + ":" + suffix.
func Sub(key, suffix string) string { return key + ":" + suffix }

// Decode is the inverse of Build for one object: it returns the values a
// key was built from, or ErrNotAKey.
func Decode(namespace, object string, literals []string, key string) ([]string, error) {
	prefix := namespace + ":{" + object + ":"
	if !strings.HasPrefix(key, prefix) || !strings.HasSuffix(key, "}") || len(literals) == 0 {
		return nil, ErrNotAKey
	}
	body := key[len(prefix) : len(key)-1]
	if !strings.HasPrefix(body, literals[0]) {
		return nil, ErrNotAKey
	}
	body = body[len(literals[0]):]
	values := make([]string, 0, len(literals)-1)
	for i := 1; i < len(literals); i++ {
		var enc string
		if i == len(literals)-1 {
			if !strings.HasSuffix(body, literals[i]) {
				return nil, ErrNotAKey
			}
			enc = body[:len(body)-len(literals[i])]
			body = ""
		} else {
			// The value ends at the first ':' (escaped values contain
			// none); the literal's text before its first ':' comes first.
			lit := literals[i]
			colon := strings.IndexByte(lit, ':')
			if colon < 0 {
				return nil, ErrNotAKey
			}
			end := strings.IndexByte(body, ':')
			if end < colon {
				return nil, ErrNotAKey
			}
			end -= colon
			if !strings.HasPrefix(body[end:], lit) {
				return nil, ErrNotAKey
			}
			enc = body[:end]
			body = body[end+len(lit):]
		}
		v, err := Unescape(enc)
		if err != nil {
			return nil, err
		}
		values = append(values, v)
	}
	if body != "" {
		return nil, ErrNotAKey
	}
	return values, nil
}

// HashTag returns the part of key Redis Cluster hashes, by Redis' rule: the
// text between the first '{' and the first '}' after it, when not empty;
// otherwise the whole key.
func HashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// Slot returns the Redis Cluster hash slot of key (CRC16 of its hash tag,
// modulo 16384).
func Slot(key string) int {
	tag := HashTag(key)
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for j := 0; j < 8; j++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
