package gen

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// limiterAlgorithms maps each limiter algorithm to the name its doc
// comment gives it (its runtime constant is defs.LimiterAlgorithms').
var limiterAlgorithms = map[string]struct{ prose string }{
	spec.GCRA:          {"GCRA"},
	spec.TokenBucket:   {"Token-bucket"},
	spec.SlidingWindow: {"Sliding-window"},
}

// limiterReceiver is the receiver of the methods of Limiters.
const limiterReceiver = "l"

// limiter is a rate limiter as generated.
type limiter struct {
	*spec.Limiter
	object
}

// limitersSection generates the limiters: section.
type limitersSection struct {
	limiters []*limiter // sorted by name
}

func init() { registerSection("limiters", func() section { return &limitersSection{} }) }

// collect keeps the spec's limiters and checks param names.
func (s *limitersSection) collect(g *generator) {
	for _, sl := range g.spec.Limiters {
		l := &limiter{Limiter: sl, object: g.newObject(sl.Object, limiterReceiver, "Limiter")}
		s.limiters = append(s.limiters, l)
	}
}

// params returns the params of every limiter.
func (s *limitersSection) params() []*param {
	return paramsOf(s.limiters)
}

// scripts returns the scripts of the algorithms used.
func (s *limitersSection) scripts() []string {
	var names []string
	for _, a := range s.algorithmsUsed() {
		names = append(names, lockimpl.ScriptNames(lockimpl.Scripts().Limiters(defs.LimiterAlgorithms[a]))...)
	}
	return names
}

// algorithmsUsed returns the algorithms of the limiters, each once, sorted.
func (s *limitersSection) algorithmsUsed() []string {
	seen := map[string]bool{}
	var algs []string
	for _, l := range s.limiters {
		if !seen[l.Algorithm] {
			seen[l.Algorithm] = true
			algs = append(algs, l.Algorithm)
		}
	}
	sort.Strings(algs)
	return algs
}

// limiterScriptsVar names the lockimpl.LimiterScripts of an algorithm:
// token-bucket -> tokenBucketLimiterScripts.
func limiterScriptsVar(algorithm string) string {
	return snakeToCamel(strings.ReplaceAll(algorithm, "-", "_")) + "LimiterScripts"
}

// render writes the Limiters type and one method per limiter.
func (s *limitersSection) render(g *generator, f *jen.File) {
	if len(s.limiters) == 0 {
		return
	}
	src := g.sourceName()
	client := jen.Op("*").Qual(runtimePath, "Client")
	f.Add(comment("Limiters gives typed access to the rate limiters declared in " + src + "."))
	f.Type().Id("Limiters").Struct(jen.Id("c").Add(client))
	f.Add(comment("NewLimiters returns the rate limiters of " + src + " over c."))
	f.Func().Id("NewLimiters").Params(jen.Id("c").Add(client)).Op("*").Id("Limiters").Block(
		jen.Return(jen.Op("&").Id("Limiters").Values(field("c", jen.Id("c")))),
	)
	for _, l := range s.limiters {
		g.renderLimiter(f, l)
	}
	for _, a := range s.algorithmsUsed() {
		f.Add(comment(fmt.Sprintf("%s are the runtime's scripts of %s limiters.", limiterScriptsVar(a), a)))
		f.Var().Id(limiterScriptsVar(a)).Op("=").Id(pinnedVar).Dot("Limiters").Call(valueOf(reflect.ValueOf(defs.LimiterAlgorithms[a])))
	}
}

// renderLimiter writes a limiter's method and the definitions it uses.
func (g *generator) renderLimiter(f *jen.File, l *limiter) {
	ns := g.spec.Namespace
	var names []string
	for _, p := range l.params {
		names = append(names, p.Name)
	}
	fallback := l.Name + " returns the " + l.Name + " rate limiter"
	if len(names) > 0 {
		fallback += " for the given " + list(names)
	}
	doc := docComment(l.Name, l.Description, fallback+".")
	onKey := limiterAlgorithms[l.Algorithm].prose + " rate limit on key " + keyDoc(ns, l.Object) + ":"
	limit := limitDoc(l.Limiter) + "."
	doc += facts(onKey, limit)
	f.Add(comment(doc))
	f.Func().Params(jen.Id(limiterReceiver).Op("*").Id("Limiters")).Id(l.Name).Params(signature(l.params)...).
		Op("*").Qual(runtimePath, "Limiter").Block(
		jen.Return(jen.Qual(implPath, "NewLimiter").Call(
			jen.Id(limiterReceiver).Dot("c"),
			jen.Op("&").Id(l.defVar()),
			keyCall(l.keyVar(), l.params),
		)),
	)

	f.Var().Defs(
		jen.Id(l.keyVar()).Op("=").Add(keyDef(ns, l.Object)),
		jen.Id(l.defVar()).Op("=").Add(literal(defs.Limiter(l.Limiter), jen.Id(limiterScriptsVar(l.Algorithm)))),
	)
}

// limitDoc says what a limiter allows, in prose: "100 per 1m with bursts of
// up to 21, shared by all clients".
func limitDoc(l *spec.Limiter) string {
	var d string
	if l.Algorithm == spec.SlidingWindow {
		d = fmt.Sprintf("at most %d in any %s", l.Rate, humanDuration(l.Per))
	} else {
		d = fmt.Sprintf("%d per %s", l.Rate, humanDuration(l.Per))
		if l.Burst > 0 {
			d += fmt.Sprintf(", bursts of up to %d", l.Burst+1)
		}
	}
	if l.IdleTTL != 0 {
		d += ", forgotten after " + humanDuration(l.IdleTTL) + " idle"
	}
	if l.Scope == spec.ScopePerClient {
		return d + ", for each runtime client"
	}
	return d + ", shared by all clients"
}
