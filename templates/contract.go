package templates

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A script's contract is the header at the top of its file, the only place
// it is written (README.md in this folder has the grammar):
//
//	-- name: what the script does (any number of lines)
//	-- KEYS[1] lock: the lock key
//	-- KEYS[2]? queue: a key a caller may leave out (this one and the later ones)
//	-- KEYS[1..3] lock, queue, waiters: several keys on one line
//	-- ARGV[5...] items: this index and every one after it (any number)
//	-- reply: {int, int} | int
//	--   what each reply means, indented continuation lines
//
// Contract parses it; the templates tests hold every script to it, and
// the runtime's tests hold every call and reply to it.

// Contract is what a script takes and returns, as its header states.
type Contract struct {
	Name string
	Keys []Param // KEYS[1], KEYS[2], ... in order
	Args []Param // ARGV[1], ARGV[2], ... in order
	// Reply is the shape of the script's reply.
	Reply Shape
}

// Param is one declared KEYS or ARGV element.
type Param struct {
	Index    int    // 1-based
	Name     string // a Lua identifier
	Optional bool   // callers may leave out this element and the later ones
	Variadic bool   // the last param: this index and any number after it
}

// Counts returns how many elements a caller passes at least, and at most
// (-1: any number).
func Counts(ps []Param) (least, most int) {
	for _, p := range ps {
		if !p.Optional && !p.Variadic {
			least = p.Index
		}
		if p.Variadic {
			return least, -1
		}
	}
	return least, len(ps)
}

// CheckCall reports why a call with nkeys KEYS and nargs ARGV does not
// fit the contract.
func (c *Contract) CheckCall(nkeys, nargs int) error {
	for _, x := range []struct {
		what  string
		ps    []Param
		count int
	}{{"KEYS", c.Keys, nkeys}, {"ARGV", c.Args, nargs}} {
		least, most := Counts(x.ps)
		if x.count < least || most >= 0 && x.count > most {
			return fmt.Errorf("%s called with %d %s, its header declares %s", c.Name, x.count, x.what, countText(least, most))
		}
	}
	return nil
}

func countText(least, most int) string {
	switch {
	case most < 0:
		return fmt.Sprintf("at least %d", least)
	case least == most:
		return strconv.Itoa(least)
	}
	return fmt.Sprintf("%d to %d", least, most)
}

var (
	paramLine = regexp.MustCompile(`^-- (KEYS|ARGV)\[(\d+)(?:\.\.(\d+))?(\.\.\.)?\](\?)? ([A-Za-z_][A-Za-z0-9_]*(?:, [A-Za-z_][A-Za-z0-9_]*)*):`)
	noneLine  = regexp.MustCompile(`^-- (KEYS|ARGV): none\b`)
)

// ContractOf parses the header of the named script (or, with the suffix
// ".luainc", of an included file, which declares no KEYS or ARGV and
// replies nothing: "-- KEYS: none", "-- ARGV: none", "-- reply: none").
func ContractOf(name string) (*Contract, error) {
	file := name + ".lua"
	if strings.HasSuffix(name, ".luainc") {
		file = name
		name = strings.TrimSuffix(name, ".luainc")
	}
	b, err := files.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("templates: no script %q", name)
	}
	return parseContract(name, file, string(b))
}

func parseContract(name, file, src string) (*Contract, error) {
	c := &Contract{Name: name}
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("templates/%s:%d: %s", file, line+1, fmt.Sprintf(format, args...))
	}
	lines := strings.Split(src, "\n")
	if !strings.HasPrefix(lines[0], "-- "+name+": ") {
		return nil, bad(0, "the header starts %q", "-- "+name+": ")
	}
	reply, none := false, map[string]bool{}
	for i, line := range lines {
		if !strings.HasPrefix(line, "--") || strings.HasPrefix(line, "-- #include ") {
			break
		}
		if m := noneLine.FindStringSubmatch(line); m != nil {
			none[m[1]] = true
			continue
		}
		if text, ok := strings.CutPrefix(line, "-- reply: "); ok {
			if reply {
				return nil, bad(i, "a second reply line")
			}
			shape, err := ParseShape(text)
			if err != nil {
				return nil, bad(i, "%v", err)
			}
			c.Reply, reply = shape, true
			continue
		}
		m := paramLine.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(line, "-- KEYS") || strings.HasPrefix(line, "-- ARGV") {
				return nil, bad(i, "%q is not a declaration: -- KEYS[n] name: text", line)
			}
			continue
		}
		list := &c.Keys
		if m[1] == "ARGV" {
			list = &c.Args
		}
		from, _ := strconv.Atoi(m[2])
		to := from
		if m[3] != "" {
			to, _ = strconv.Atoi(m[3])
		}
		names := strings.Split(m[6], ", ")
		if len(names) != to-from+1 {
			return nil, bad(i, "%s[%d..%d] names %d elements", m[1], from, to, len(names))
		}
		for j, n := range names {
			p := Param{Index: from + j, Name: n, Optional: m[5] == "?", Variadic: m[4] != ""}
			if want := len(*list) + 1; p.Index != want {
				return nil, bad(i, "%s[%d] declared where %s[%d] is due", m[1], p.Index, m[1], want)
			}
			if k := len(*list); k > 0 {
				prev := (*list)[k-1]
				if prev.Variadic {
					return nil, bad(i, "%s[%d] follows a variadic %s[%d...]", m[1], p.Index, m[1], prev.Index)
				}
				if prev.Optional && !p.Optional && !p.Variadic {
					return nil, bad(i, "%s[%d] is required after the optional %s[%d]", m[1], p.Index, m[1], prev.Index)
				}
			}
			*list = append(*list, p)
		}
	}
	if !reply {
		return nil, bad(0, "no line %q in the header", "-- reply: ")
	}
	for _, what := range []string{"KEYS", "ARGV"} {
		n := len(c.Keys)
		if what == "ARGV" {
			n = len(c.Args)
		}
		if n == 0 && !none[what] {
			return nil, bad(0, "the header declares no %s (say %q)", what, "-- "+what+": none")
		}
	}
	return c, nil
}

// Shape is the shape of a script's reply, as Redis converts a Lua value:
// alternatives separated by " | ", each "int" (a Lua number or true),
// "string", "nil" (a Lua false or nil), "any", "none" (an included file
// replies nothing), or a table "{a, b, c}" whose last element may end in
// "..." (any number more of it, none included).
type Shape struct {
	text string
	alts []alt
}

type alt struct {
	atom  string // int, string, nil, any, none; "" for a table
	elems []string
	more  bool // the last element repeats
}

func (s Shape) String() string { return s.text }

// ParseShape parses a reply shape.
func ParseShape(text string) (Shape, error) {
	s := Shape{text: text}
	for _, a := range strings.Split(text, " | ") {
		if inner, ok := strings.CutPrefix(a, "{"); ok {
			inner, ok = strings.CutSuffix(inner, "}")
			if !ok {
				return Shape{}, fmt.Errorf("reply %q: %q does not end in }", text, a)
			}
			t := alt{}
			inner, t.more = strings.CutSuffix(inner, "...")
			for _, e := range strings.Split(inner, ", ") {
				if !isAtom(e) || e == "none" {
					return Shape{}, fmt.Errorf("reply %q: element %q is not int, string, nil or any", text, e)
				}
				t.elems = append(t.elems, e)
			}
			s.alts = append(s.alts, t)
			continue
		}
		if !isAtom(a) {
			return Shape{}, fmt.Errorf("reply %q: %q is not int, string, nil, any, none or {...}", text, a)
		}
		s.alts = append(s.alts, alt{atom: a})
	}
	return s, nil
}

func isAtom(s string) bool {
	switch s {
	case "int", "string", "nil", "any", "none":
		return true
	}
	return false
}

// Match reports why v, a reply as go-redis returns it (int64, string, nil
// for Redis' nil, []any for an array), does not have the shape.
func (s Shape) Match(v any) error {
	for _, a := range s.alts {
		if a.match(v) {
			return nil
		}
	}
	return fmt.Errorf("reply %#v is not %s", v, s.text)
}

func (a alt) match(v any) bool {
	if a.atom != "" {
		return matchAtom(a.atom, v)
	}
	vs, ok := v.([]any)
	if !ok || len(vs) < len(a.elems)-boolInt(a.more) || !a.more && len(vs) != len(a.elems) {
		return false
	}
	for i, e := range vs {
		if !matchAtom(a.elems[min(i, len(a.elems)-1)], e) {
			return false
		}
	}
	return true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func matchAtom(atom string, v any) bool {
	switch atom {
	case "int":
		_, ok := v.(int64)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "nil":
		return v == nil
	case "any":
		return true
	}
	return false
}

// Body returns the source of the named script (or included file, with
// its suffix) after its header, without what it includes.
func Body(name string) string {
	file := name + ".lua"
	if strings.HasSuffix(name, ".luainc") {
		file = name
	}
	b, _ := files.ReadFile(file)
	lines := strings.Split(string(b), "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "--") && !strings.HasPrefix(lines[i], "-- #include ") {
		i++
	}
	return strings.Join(lines[i:], "\n")
}

// Summary returns what the header of the named script's source says the
// script does (its first lines, before the declarations), without the
// leading "-- name: ", one line of the header a line; "" when src has no
// header.
func Summary(name, src string) string {
	lines := strings.Split(src, "\n")
	first, ok := strings.CutPrefix(lines[0], "-- "+name+": ")
	if !ok {
		return ""
	}
	out := []string{first}
	for _, line := range lines[1:] {
		text, ok := strings.CutPrefix(line, "-- ")
		if !ok || paramLine.MatchString(line) || noneLine.MatchString(line) || strings.HasPrefix(line, "-- reply: ") || strings.HasPrefix(line, "-- #include ") {
			break
		}
		out = append(out, text)
	}
	return strings.Join(out, "\n")
}
