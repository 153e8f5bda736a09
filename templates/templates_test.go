package templates_test

import (
	"context"
	"slices"
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

func TestLockSetsNameScripts(t *testing.T) {
	names := templates.Names()
	for kind, set := range templates.Locks {
		for _, name := range set.Names() {
			if !slices.Contains(names, name) {
				t.Errorf("lock kind %s names script %q, which does not exist", kind, name)
			}
		}
	}
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
