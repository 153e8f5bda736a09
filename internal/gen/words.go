package gen

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dave/jennifer/jen"
)

// comment returns text as a // comment, one line per line of text, with
// blank lines kept as "//".
func comment(text string) *jen.Statement {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			lines[i] = "//"
		} else {
			lines[i] = "// " + l
		}
	}
	// A leading "//" turns off jennifer's own comment formatting, which
	// would use /* */ for more than one line.
	return jen.Comment(strings.Join(lines, "\n"))
}

// docComment returns the doc comment of the declaration name from a
// spec's description: "Serialises changes to one order." becomes
// "Order serialises changes to one order.". An empty description gives
// fallback.
func docComment(name, description, fallback string) string {
	d := strings.TrimSpace(description)
	if d == "" {
		return fallback
	}
	if !strings.HasPrefix(d, name+" ") {
		d = name + " " + lowerFirstWord(d)
	}
	if r, _ := utf8.DecodeLastRuneInString(d); !strings.ContainsRune(".!?", r) {
		d += "."
	}
	return d
}

// lowerFirstWord lower-cases the first letter of s unless the first word
// is an initialism or a name with more capitals ("API", "IDs", "McKay").
func lowerFirstWord(s string) string {
	first, _, _ := strings.Cut(s, " ")
	r, size := utf8.DecodeRuneInString(first)
	if !unicode.IsUpper(r) || strings.ContainsFunc(first[size:], unicode.IsUpper) {
		return s
	}
	return string(unicode.ToLower(r)) + s[size:]
}

// lowerCamel turns an exported Go name into an unexported one, the way a
// Go programmer would: Order -> order, HTTPServer -> httpServer, API -> api.
func lowerCamel(name string) string {
	runes := []rune(name)
	n := 0
	for n < len(runes) && unicode.IsUpper(runes[n]) {
		n++
	}
	if n > 1 && n < len(runes) && unicode.IsLower(runes[n]) {
		n-- // the last capital starts the next word
	}
	for i := range n {
		runes[i] = unicode.ToLower(runes[i])
	}
	return string(runes)
}

// snakeToCamel turns a script name into a Go name: force_unlock -> forceUnlock.
func snakeToCamel(name string) string {
	parts := strings.Split(name, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// durationUnits are the units a duration is written in, largest first.
var durationUnits = []struct {
	d    time.Duration
	name string
}{
	{time.Hour, "Hour"},
	{time.Minute, "Minute"},
	{time.Second, "Second"},
	{time.Millisecond, "Millisecond"},
	{time.Microsecond, "Microsecond"},
	{time.Nanosecond, "Nanosecond"},
}

// durationExpr returns d as a Go expression a person would write:
// 30 * time.Second, 1500 * time.Millisecond, time.Minute.
func durationExpr(d time.Duration) *jen.Statement {
	for _, u := range durationUnits {
		if d%u.d != 0 {
			continue
		}
		unit := jen.Qual("time", u.name)
		if n := d / u.d; n != 1 {
			return jen.Lit(int(n)).Op("*").Add(unit)
		}
		return unit
	}
	panic("unreachable: every duration is a multiple of a nanosecond")
}

// humanDuration returns d as a person would write it in prose: 30s, 2m,
// 1m30s, 1.5s, 250ms.
func humanDuration(d time.Duration) string {
	if d < time.Second {
		return d.String()
	}
	var b strings.Builder
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m := d % time.Hour / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if s := d % time.Minute; s > 0 {
		b.WriteString(s.String())
	}
	return b.String()
}

// list joins words as in prose: "a", "a and b", "a, b and c".
func list(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// facts is the paragraph of a method's doc comment that states what a
// reader of the call site wants: onKey (the kind and its key), then rest,
// on the same line unless that would be longer than 100 characters.
func facts(onKey, rest string) string {
	if len(onKey)+1+len(rest) <= 100 {
		return "\n\n" + onKey + " " + rest
	}
	return "\n\n" + onKey + "\n" + rest
}
