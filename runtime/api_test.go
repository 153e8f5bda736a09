package runtime_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// TestDocShowsUserAPI: what generated code alone uses (the definitions,
// their scripts, the constructors that take them, the version pin) is in
// package lockimpl, not in the runtime's documentation, which shows what
// users call.
func TestDocShowsUserAPI(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	generatedOnly := map[string]bool{}
	for _, n := range strings.Fields(`GeneratedCodeVersion1 Script KeyDef LockKind LockScripts LockDef SyncDef
		SemaphoreScripts SemaphoreDef LatchScripts LatchDef LimiterAlgorithm LimiterScope LimiterScripts
		LimiterDef QueueScripts QueueDef RedLockDef Reentrant Simple Fair ReadWrite Fenced GCRA TokenBucket
		SlidingWindow ScopeOverall ScopePerClient NewQueue NewReliableQueue NewDelayedQueue
		NewDelayedReliableQueue Client.Lock Client.RWLock Client.Semaphore Client.Latch Client.Limiter
		Client.Preload Quorum.RedLock Pin Pins Pinned GeneratedCodeVersion3`) {
		generatedOnly[n] = true
	}
	shown := 0
	check := func(name string) {
		shown++
		if generatedOnly[name] {
			t.Errorf("go doc of the runtime shows %s, which only generated code uses (it belongs in lockimpl)", name)
		}
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, s := range v.Decl.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.IsExported() {
						check(n.Name)
					}
				}
			}
		}
	}
	d := doc.New(pkgs["runtime"], "github.com/lockgen/lockgen/runtime", 0)
	values(d.Consts)
	values(d.Vars)
	for _, f := range d.Funcs {
		check(f.Name)
	}
	for _, typ := range d.Types {
		check(typ.Name)
		values(typ.Consts)
		values(typ.Vars)
		for _, f := range typ.Funcs {
			check(f.Name)
		}
		for _, m := range typ.Methods {
			check(typ.Name + "." + m.Name)
		}
	}
	if shown == 0 {
		t.Fatal("no exported names found")
	}
}
