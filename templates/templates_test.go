package templates_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lockgen/lockgen/internal/gen"
	"github.com/lockgen/lockgen/scripts/redistest"
	"github.com/lockgen/lockgen/templates"
)

// sources returns every script's source by name.
func sources(t *testing.T) map[string]string {
	t.Helper()
	names := templates.Names()
	if len(names) == 0 {
		t.Fatal("no scripts embedded")
	}
	srcs := map[string]string{}
	for _, name := range names {
		src, err := templates.Source(name)
		if err != nil {
			t.Fatal(err)
		}
		srcs[name] = src
	}
	return srcs
}

// TestScriptsParse checks every script the way lockgen does before it
// emits one: it parses as Lua and fits in a Go raw string.
func TestScriptsParse(t *testing.T) {
	for name, src := range sources(t) {
		if err := gen.CheckScript(name, src); err != nil {
			t.Error(err)
		}
	}
}

func TestSourceOfMissingScript(t *testing.T) {
	if _, err := templates.Source("no_such_script"); err == nil {
		t.Error("Source of a missing script succeeded")
	}
}

// TestSHAMatchesRedis loads every script into a real Redis and checks that
// the SHA1 Redis returns is the one lockgen emits, so that EVALSHA with
// the emitted SHA runs the emitted source.
func TestSHAMatchesRedis(t *testing.T) {
	rdb := redistest.Single(t).Client()
	ctx := context.Background()
	for name, src := range sources(t) {
		got, err := rdb.ScriptLoad(ctx, src).Result()
		if err != nil {
			t.Fatalf("%s: SCRIPT LOAD: %v", name, err)
		}
		if want := gen.ScriptSHA1(src); got != want {
			t.Errorf("%s: Redis computes SHA1 %s, lockgen emits %s", name, got, want)
		}
	}
}

// TestScriptHeaders holds every script to its header (see contract.go):
// the header parses, and the body uses no KEYS or ARGV element the header
// does not declare (an index computed at run time needs a variadic
// declaration, KEYS[n...], or a loop "for i = 1, n do" within the
// declared ones); an included file uses none at all.
func TestScriptHeaders(t *testing.T) {
	index := regexp.MustCompile(`\b(KEYS|ARGV)\[([^\]]*)\]`)
	loop := regexp.MustCompile(`\bfor (\w+) = 1, (\d+) do\b`)
	includes, err := filepath.Glob("*.luainc")
	if err != nil || len(includes) == 0 {
		t.Fatalf("no included files: %v", err)
	}
	files := append(templates.Names(), includes...)
	for _, name := range files {
		c, err := templates.ContractOf(name)
		if err != nil {
			t.Error(err)
			continue
		}
		body := templates.Body(name)
		bounds := map[string]int{}
		for _, m := range loop.FindAllStringSubmatch(body, -1) {
			bounds[m[1]], _ = strconv.Atoi(m[2])
		}
		for _, m := range index.FindAllStringSubmatch(body, -1) {
			ps := c.Keys
			if m[1] == "ARGV" {
				ps = c.Args
			}
			_, most := templates.Counts(ps)
			n, err := strconv.Atoi(m[2])
			if b, ok := bounds[m[2]]; ok {
				n, err = b, nil
			}
			switch {
			case most < 0:
			case err != nil:
				t.Errorf("%s uses %s, an index computed at run time, but declares no %s[n...]", name, m[0], m[1])
			case n > most:
				t.Errorf("%s uses %s, which its header does not declare", name, m[0])
			}
		}
	}
}

// TestContractGrammar checks that the header grammar refuses what it
// should, so that TestScriptHeaders can fail.
func TestContractGrammar(t *testing.T) {
	for _, bad := range []string{"{int, int", "{int, bool}", "number", "int |", "{none}"} {
		if _, err := templates.ParseShape(bad); err == nil {
			t.Errorf("ParseShape(%q) succeeded", bad)
		}
	}
	shape, err := templates.ParseShape("nil | {string} | {int, string...}")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{nil, []any{"a"}, []any{int64(1)}, []any{int64(1), "a", "b"}} {
		if err := shape.Match(v); err != nil {
			t.Error(err)
		}
	}
	for _, v := range []any{int64(1), "a", []any{}, []any{"a", "b"}, []any{int64(1), int64(2)}} {
		if err := shape.Match(v); err == nil {
			t.Errorf("%#v matches %s", v, shape)
		}
	}
	c, err := templates.ContractOf("simple_acquire")
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		keys, args int
		ok         bool
	}{{3, 4, true}, {1, 2, true}, {1, 4, true}, {0, 2, false}, {3, 5, false}, {4, 4, false}, {3, 1, false}} {
		if err := c.CheckCall(call.keys, call.args); (err == nil) != call.ok {
			t.Errorf("simple_acquire with %d KEYS, %d ARGV: %v", call.keys, call.args, err)
		}
	}
}

// forwarded matches a script argument converted to a number only to be
// handed on to redis.call: tonumber(ARGV[n]) as a whole argument.
var forwarded = regexp.MustCompile(`redis\.call\(.*,\s*tonumber\(ARGV\[[^\]]+\]\)\s*[,)]`)

// TestDurationsForwardedAsStrings holds the scripts to templates/README.md's
// cost conventions: Redis formats a Lua number passed to redis.call back
// into a string (with %.17g on Redis 7.0), which cost an uncontended
// Lock+Unlock more Redis time than the rest of its fast path. So no script
// hands redis.call a tonumber'd argument, and a lock's fast path, the code
// before its "-- #include registry", converts nothing at all.
func TestDurationsForwardedAsStrings(t *testing.T) {
	fastPaths := 0
	for _, name := range templates.Names() {
		raw, err := os.ReadFile(name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if forwarded.MatchString(line) {
				t.Errorf("%s.lua:%d: an argument converted to a number only to be passed to redis.call; pass the ARGV string: %s", name, i+1, strings.TrimSpace(line))
			}
		}
		fast, _, ok := strings.Cut(string(raw), "-- #include registry")
		if !ok {
			continue
		}
		code := 0
		for i, line := range strings.Split(fast, "\n") {
			if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "--") {
				continue
			}
			code++
			if strings.Contains(line, "tonumber(") {
				t.Errorf("%s.lua:%d: the fast path, before the registry's include, converts with tonumber: %s", name, i+1, line)
			}
		}
		if code > 0 {
			fastPaths++
		}
	}
	// reentrant and simple acquire and release, fenced acquire.
	if fastPaths < 5 {
		t.Errorf("%d scripts with a fast path before the registry's include, want at least 5", fastPaths)
	}
}
