package keys

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		pattern      string
		literals     []string
		placeholders []string
		offsets      []int
	}{
		{"order", []string{"order"}, nil, nil},
		{"order:{orderID}", []string{"order:", ""}, []string{"orderID"}, []int{6}},
		{"{id}", []string{"", ""}, []string{"id"}, []int{0}},
		{"{a}:{b}", []string{"", ":", ""}, []string{"a", "b"}, []int{0, 4}},
		{"tenant:{t}:cart:{c}:v2", []string{"tenant:", ":cart:", ":v2"}, []string{"t", "c"}, []int{7, 16}},
		{"x{a}-:-{b}y", []string{"x", "-:-", "y"}, []string{"a", "b"}, []int{1, 7}},
		{"ключ:{ид}", []string{"ключ:", ""}, []string{"ид"}, []int{9}},
		{"a%b:{c}", []string{"a%b:", ""}, []string{"c"}, []int{4}},
	} {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", tc.pattern, err)
			continue
		}
		want := &Pattern{Literals: tc.literals, Placeholders: tc.placeholders, Offsets: tc.offsets}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("ParsePattern(%q) = %+v, want %+v", tc.pattern, p, want)
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	type perr struct {
		offset int
		msg    string // a substring of the message
	}
	for _, tc := range []struct {
		pattern string
		errs    []perr
	}{
		{"", []perr{{0, "key pattern is empty"}}},
		{"order:{id", []perr{{6, "unclosed '{'"}}},
		{"order}", []perr{{5, "unmatched '}'"}}},
		{"{a}{b}", []perr{{3, "placeholder {b} must be separated from {a}"}}},
		{"{a}-{b}", []perr{{4, "by a literal containing ':'"}}},
		{"{a}:{a}", []perr{{4, "placeholder {a} appears twice"}}},
		{"x:{order-id}", []perr{{2, `invalid placeholder "{order-id}"`}}},
		{"x:{}", []perr{{2, `invalid placeholder "{}"`}}},
		{"x:{1a}", []perr{{2, `invalid placeholder "{1a}"`}}},
		{"x:{type}", []perr{{2, "placeholder {type} is a Go keyword"}}},
		{"x:{_}", []perr{{2, "placeholder {_} is blank"}}},
		{"a b", []perr{{1, "contains ' '"}}},
		{"a\tb", []perr{{1, `contains '\t'`}}},
		{"a\u00a0b", []perr{{1, "contains"}}},
		{"a\xffb", []perr{{1, "not valid UTF-8"}}},
		{"é}{x", []perr{{2, "unmatched '}'"}, {3, "unclosed '{'"}}},
		{"a b}:{c} {c}", []perr{{1, "contains ' '"}, {3, "unmatched '}'"}, {8, "contains ' '"}, {9, "appears twice"}}},
	} {
		p, err := ParsePattern(tc.pattern)
		if err == nil {
			t.Errorf("ParsePattern(%q) = %+v, want errors", tc.pattern, p)
			continue
		}
		if p != nil {
			t.Errorf("ParsePattern(%q) returned a pattern with errors", tc.pattern)
		}
		var got []perr
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var pe *PatternError
			if !errors.As(e, &pe) {
				t.Fatalf("ParsePattern(%q): error %T, want *PatternError", tc.pattern, e)
			}
			got = append(got, perr{pe.Offset, pe.Error()})
		}
		if len(got) != len(tc.errs) {
			t.Errorf("ParsePattern(%q): got %d errors %v, want %d", tc.pattern, len(got), got, len(tc.errs))
			continue
		}
		for i, g := range got {
			if g.offset != tc.errs[i].offset || !strings.Contains(g.msg, tc.errs[i].msg) {
				t.Errorf("ParsePattern(%q) error %d = %d %q, want %d %q", tc.pattern, i, g.offset, g.msg, tc.errs[i].offset, tc.errs[i].msg)
			}
		}
	}
}

func TestIsIdent(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "_": true, "orderID": true, "_x1": true, "numéro": true, "ид": true, "Ünï": true,
		"": false, "1a": false, "a-b": false, "a b": false, "type": false, "func": false, "a.b": false, "\xff": false,
	} {
		if got := IsIdent(s); got != want {
			t.Errorf("IsIdent(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestValidNamespace(t *testing.T) {
	for _, ns := range []string{"shop", "acme.inventory-v2", "A_1", "0"} {
		if err := ValidNamespace(ns); err != nil {
			t.Errorf("ValidNamespace(%q) = %v", ns, err)
		}
	}
	for _, ns := range []string{"", "a:b", "a{b", "a}b", "café", "a b", "a/b", "%"} {
		if err := ValidNamespace(ns); err == nil {
			t.Errorf("ValidNamespace(%q) = nil, want an error", ns)
		}
	}
}

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{"", ""},
		{"plain", "plain"},
		{":", "%3A"},
		{"%", "%25"},
		{"{", "%7B"},
		{"}", "%7D"},
		{"%3A", "%253A"},
		{"a:b{c}d%e", "a%3Ab%7Bc%7Dd%25e"},
		{"é:日本", "é%3A日本"},
		{"\xff\x00", "\xff\x00"},
	} {
		if got := Escape(tc.in); got != tc.out {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.out)
		}
		if got, err := Unescape(tc.out); err != nil || got != tc.in {
			t.Errorf("Unescape(%q) = %q, %v; want %q", tc.out, got, err, tc.in)
		}
	}
	for _, bad := range []string{"%", "%3", "%3a", "%7b", "%41", "a:b", "{", "}", "%%", "%2"} {
		if got, err := Unescape(bad); !errors.Is(err, ErrNotAKey) {
			t.Errorf("Unescape(%q) = %q, %v; want ErrNotAKey", bad, got, err)
		}
	}
}

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		values  []string
		key     string
	}{
		{"migrations", nil, "ns:{Obj:migrations}"},
		{"order:{id}", []string{"42"}, "ns:{Obj:order:42}"},
		{"order:{id}", []string{""}, "ns:{Obj:order:}"},
		{"{id}", []string{"x"}, "ns:{Obj:x}"},
		{"order:{a}:{b}", []string{"x:y", "z"}, "ns:{Obj:order:x%3Ay:z}"},
		{"order:{a}:{b}", []string{"x", "y:z"}, "ns:{Obj:order:x:y%3Az}"},
		{"t:{a}:c:{b}:v2", []string{"{}", "%"}, "ns:{Obj:t:%7B%7D:c:%25:v2}"},
	} {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		key := Build("ns", "Obj", p.Literals, tc.values...)
		if key != tc.key {
			t.Errorf("Build(%q, %q) = %q, want %q", tc.pattern, tc.values, key, tc.key)
		}
		got, err := Decode("ns", "Obj", p.Literals, key)
		if err != nil || !slices.Equal(got, tc.values) {
			t.Errorf("Decode(%q) = %q, %v; want %q", key, got, err, tc.values)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	p, _ := ParsePattern("order:{a}:{b}:tail")
	for _, key := range []string{
		"",
		"ns:{Obj:order:x:y:tail",       // no closing brace
		"ns:{Other:order:x:y:tail}",    // another object
		"other:{Obj:order:x:y:tail}",   // another namespace
		"ns:{Obj:order:x:y:z:tail}",    // a ':' in the last value
		"ns:{Obj:order:x:y:tai}",       // wrong tail
		"ns:{Obj:orders:x:y:tail}",     // wrong head
		"ns:{Obj:order:x%3a:y:tail}",   // not canonical
		"ns:{Obj:order:x%:y:tail}",     // bad escape
		"ns:{Obj:order:x{:y:tail}",     // unescaped brace
		"ns:{Obj:order:x:y:tail}extra", // text after the brace
		"ns:{Obj:order:xy:tail}",       // one value missing
		"ns:{Obj:order:x}",
	} {
		if v, err := Decode("ns", "Obj", p.Literals, key); !errors.Is(err, ErrNotAKey) {
			t.Errorf("Decode(%q) = %q, %v; want ErrNotAKey", key, v, err)
		}
	}
	if _, err := Decode("ns", "Obj", nil, "ns:{Obj:}"); !errors.Is(err, ErrNotAKey) {
		t.Errorf("Decode without literals: %v", err)
	}
}

func TestHashTag(t *testing.T) {
	for _, tc := range []struct{ key, tag string }{
		{"foo", "foo"},
		{"{user1000}.following", "user1000"},
		{"foo{}{bar}", "foo{}{bar}"},
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
		{"{", "{"},
		{"}{", "}{"},
		{"ns:{Obj:order:1}", "Obj:order:1"},
		{"ns:{Obj:order:1}:queue", "Obj:order:1"},
	} {
		if got := HashTag(tc.key); got != tc.tag {
			t.Errorf("HashTag(%q) = %q, want %q", tc.key, got, tc.tag)
		}
	}
}

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, slot := range map[string]int{
		"foo":       12182,
		"bar":       5061,
		"123456789": 0x31C3, // the CRC16 check value
		"":          0,
		"{foo}bar":  12182,
	} {
		if got := Slot(key); got != slot {
			t.Errorf("Slot(%q) = %d, want %d", key, got, slot)
		}
	}
	if a, b := Slot("{user1000}.following"), Slot("{user1000}.followers"); a != b {
		t.Errorf("Slot({user1000}.following) = %d, Slot({user1000}.followers) = %d", a, b)
	}
	if Slot("{user1000}.following") != Slot("user1000") {
		t.Error("a key's slot is not its hash tag's slot")
	}
}

func TestSub(t *testing.T) {
	key := Build("ns", "Obj", []string{"order:", ""}, "a}b")
	for _, s := range []string{"queue", "timeouts", "channel", "", "x:y"} {
		sub := Sub(key, s)
		if Slot(sub) != Slot(key) || HashTag(sub) != HashTag(key) {
			t.Errorf("Sub(%q, %q) = %q is in another slot", key, s, sub)
		}
	}
}

// valuePool has the values most likely to break an encoding.
var valuePool = []string{
	"", ":", "::", "{", "}", "{}", "}{", "%", "%%", "%3A", "%25", "%7B", "%7D", "%3a",
	"a", "a:", ":a", "a:b", "x:y", "y:z", "x", "z", "é", "日本語", "🔒", "\x00", "\xff", " ", "\n",
	"{user1000}", "a%3Ab", "tail", ":tail",
}

// randValue returns a value from the pool, a random mix of its elements,
// or a long random string.
func randValue(r *rand.Rand) string {
	switch n := r.Intn(40); {
	case n < 20:
		return valuePool[r.Intn(len(valuePool))]
	case n < 39:
		var b strings.Builder
		for range r.Intn(6) {
			b.WriteString(valuePool[r.Intn(len(valuePool))])
		}
		return b.String()
	default:
		b := make([]byte, 10000+r.Intn(300))
		for i := range b {
			b[i] = "ab:{}%3AZé"[r.Intn(11)]
		}
		return string(b)
	}
}

// randLiteral returns a random pattern literal; it contains a ':' when
// colon is true.
func randLiteral(r *rand.Rand, colon bool) string {
	const chars = "ab:-_.%xy"
	var b strings.Builder
	for range r.Intn(5) {
		b.WriteByte(chars[r.Intn(len(chars))])
	}
	if r.Intn(5) == 0 {
		b.WriteString("é")
	}
	s := b.String()
	if colon && !strings.Contains(s, ":") {
		if r.Intn(2) == 0 {
			s = ":" + s
		} else {
			s += ":"
		}
	}
	return s
}

// randPattern returns a random valid pattern with up to 4 placeholders.
func randPattern(r *rand.Rand) string {
	n := r.Intn(5)
	var b strings.Builder
	b.WriteString(randLiteral(r, false))
	for i := range n {
		if i > 0 {
			b.WriteString(randLiteral(r, true))
		}
		fmt.Fprintf(&b, "{p%d}", i)
	}
	b.WriteString(randLiteral(r, false))
	if b.Len() == 0 {
		return "k"
	}
	return b.String()
}

type instance struct {
	namespace, object string
	values            []string
}

// TestBuildProperties checks the encoding on thousands of random
// patterns and values: Decode inverts Build, no two instances of any
// objects share a key, derived keys stay in the slot, and the hash tag is
// the whole instance identity.
func TestBuildProperties(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	type object struct {
		namespace, name string
		pattern         *Pattern
	}
	var objects []object
	// Names that are prefixes of one another, in two namespaces.
	for _, ns := range []string{"shop", "shop.v2"} {
		for _, name := range []string{"A", "AB", "ABC", "Order", "Order2", "Ord"} {
			src := randPattern(r)
			p, err := ParsePattern(src)
			if err != nil {
				t.Fatalf("random pattern %q: %v", src, err)
			}
			objects = append(objects, object{ns, name, p})
		}
	}
	seen := map[string]instance{}
	const cases = 20000
	for range cases {
		o := objects[r.Intn(len(objects))]
		values := make([]string, len(o.pattern.Placeholders))
		for i := range values {
			values[i] = randValue(r)
		}
		key := Build(o.namespace, o.name, o.pattern.Literals, values...)
		in := instance{o.namespace, o.name, values}
		if prev, ok := seen[key]; ok && !reflect.DeepEqual(prev, in) {
			t.Fatalf("%+v and %+v share the key %q", prev, in, key)
		}
		seen[key] = in

		got, err := Decode(o.namespace, o.name, o.pattern.Literals, key)
		if err != nil || !slices.Equal(got, values) {
			t.Fatalf("Decode(Build(%q)) = %q, %v (pattern literals %q, key %q)", values, got, err, o.pattern.Literals, key)
		}
		if open, end := strings.IndexByte(key, '{'), strings.LastIndexByte(key, '}'); HashTag(key) != key[open+1:end] || end != len(key)-1 {
			t.Fatalf("HashTag(%q) = %q, want the text between the first '{' and the final '}'", key, HashTag(key))
		}
		if sub := Sub(key, randValue(r)); Slot(sub) != Slot(key) {
			t.Fatalf("Sub(%q) = %q moved to another slot", key, sub)
		}
		// The key decodes as no other object's.
		other := objects[r.Intn(len(objects))]
		if other.name != o.name || other.namespace != o.namespace {
			if v, err := Decode(other.namespace, other.name, other.pattern.Literals, key); err == nil {
				t.Fatalf("key %q of %s/%s decodes as %s/%s with %q", key, o.namespace, o.name, other.namespace, other.name, v)
			}
		}
	}
	if len(seen) < cases/2 {
		t.Errorf("only %d distinct keys in %d cases; the generator is too narrow", len(seen), cases)
	}
}

// TestBuildInjectiveSmall checks every tuple of two values from a small
// alphabet of troublesome values gives a distinct key for each pattern.
func TestBuildInjectiveSmall(t *testing.T) {
	small := []string{"", ":", "a", "a:", ":a", "a:b", "%", "%3A", "{", "}", "b"}
	for _, src := range []string{"order:{a}:{b}", "{a}:{b}", "x{a}:-:{b}y", "order:{a}:{b}:tail", "{a}:a:{b}"} {
		p, err := ParsePattern(src)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string][2]string{}
		for _, a := range small {
			for _, b := range small {
				key := Build("ns", "O", p.Literals, a, b)
				if prev, ok := seen[key]; ok {
					t.Errorf("pattern %q: %q and %q share the key %q", src, prev, [2]string{a, b}, key)
				}
				seen[key] = [2]string{a, b}
			}
		}
	}
}

// FuzzKeys checks that two value pairs give the same key only when they
// are equal, and that Decode inverts Build, for patterns with and without
// a literal tail; and that any text Decode accepts is the key Build makes
// of the values it returns.
func FuzzKeys(f *testing.F) {
	f.Add("x:y", "z", "x", "y:z", "ns:{Obj:order:a:b}")
	f.Add("", "", ":", "", "ns:{Obj:order::}")
	f.Add("{", "}", "%7B", "%7D", "ns:{Obj:order:%7B:%7D:tail}")
	f.Add("é", "%3A", "\xff", strings.Repeat("{:}", 100), "ns:{Obj:x%3a}")
	patterns := []string{"order:{a}:{b}", "order:{a}:{b}:tail", "{a}:{b}x", "{a}-:-{b}"}
	var parsed []*Pattern
	for _, src := range patterns {
		p, err := ParsePattern(src)
		if err != nil {
			f.Fatal(err)
		}
		parsed = append(parsed, p)
	}
	f.Fuzz(func(t *testing.T, a1, b1, a2, b2, text string) {
		for i, p := range parsed {
			k1 := Build("ns", "Obj", p.Literals, a1, b1)
			k2 := Build("ns", "Obj", p.Literals, a2, b2)
			if (a1 != a2 || b1 != b2) && k1 == k2 {
				t.Fatalf("pattern %q: (%q, %q) and (%q, %q) share the key %q", patterns[i], a1, b1, a2, b2, k1)
			}
			if v, err := Decode("ns", "Obj", p.Literals, k1); err != nil || !slices.Equal(v, []string{a1, b1}) {
				t.Fatalf("pattern %q: Decode(%q) = %q, %v; want [%q %q]", patterns[i], k1, v, err, a1, b1)
			}
			if HashTag(k1) != k1[len("ns:{"):len(k1)-1] {
				t.Fatalf("HashTag(%q) = %q", k1, HashTag(k1))
			}
			if v, err := Decode("ns", "Obj", p.Literals, text); err == nil {
				if k := Build("ns", "Obj", p.Literals, v...); k != text {
					t.Fatalf("pattern %q: Decode(%q) = %q, which builds %q", patterns[i], text, v, k)
				}
			}
		}
		if !utf8.ValidString(a1) {
			return
		}
		// A value used as a whole pattern literal must not break parsing.
		if p, err := ParsePattern(a1); err == nil && len(p.Literals) != len(p.Placeholders)+1 {
			t.Fatalf("ParsePattern(%q): %d literals for %d placeholders", a1, len(p.Literals), len(p.Placeholders))
		}
	})
}
