package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// latchReceiver is the receiver of the methods of Latches.
const latchReceiver = "l"

// latchScriptsVar names the lockimpl.LatchScripts of the file.
const latchScriptsVar = "latchScripts"

// latch is a count-down latch as generated.
type latch struct {
	*spec.Latch
	object
}

// latchesSection generates the latches: section.
type latchesSection struct {
	latches []*latch // sorted by name
}

func init() { registerSection("latches", func() section { return &latchesSection{} }) }

// collect keeps the spec's latches and checks param names.
func (sec *latchesSection) collect(g *generator) {
	for _, sl := range g.spec.Latches {
		l := &latch{Latch: sl, object: g.newObject(sl.Object, latchReceiver, "Latch")}
		sec.latches = append(sec.latches, l)
	}
}

// params returns the params of every latch.
func (sec *latchesSection) params() []*param {
	return paramsOf(sec.latches)
}

// scripts returns the latch scripts when there is a latch.
func (sec *latchesSection) scripts() []string {
	if len(sec.latches) == 0 {
		return nil
	}
	return lockimpl.ScriptNames(lockimpl.Scripts().Latches())
}

// render writes the Latches type, one method per latch and the scripts
// they share.
func (sec *latchesSection) render(g *generator, f *jen.File) {
	if len(sec.latches) == 0 {
		return
	}
	src := g.sourceName()
	client := jen.Op("*").Qual(runtimePath, "Client")
	f.Add(comment("Latches gives typed access to the count-down latches declared in " + src + "."))
	f.Type().Id("Latches").Struct(jen.Id("c").Add(client))
	f.Add(comment("NewLatches returns the count-down latches of " + src + " over c."))
	f.Func().Id("NewLatches").Params(jen.Id("c").Add(client)).Op("*").Id("Latches").Block(
		jen.Return(jen.Op("&").Id("Latches").Values(field("c", jen.Id("c")))),
	)
	for _, l := range sec.latches {
		g.renderLatch(f, l)
	}
	f.Add(comment(latchScriptsVar + " are the runtime's scripts of count-down latches."))
	f.Var().Id(latchScriptsVar).Op("=").Id(pinnedVar).Dot("Latches").Call()
}

// renderLatch writes a latch's method and the definitions it uses.
func (g *generator) renderLatch(f *jen.File, l *latch) {
	ns := g.spec.Namespace
	var names []string
	for _, p := range l.params {
		names = append(names, p.Name)
	}
	fallback := l.Name + " returns the " + l.Name + " count-down latch"
	if len(names) > 0 {
		fallback += " for the given " + list(names)
	}
	doc := docComment(l.Name, l.Description, fallback+".")
	onKey := fmt.Sprintf("Count-down latch of %d on key %s,", l.Count, keyDoc(ns, l.Object))
	expiry := "expiring " + humanDuration(l.Expire) + " after it is set."
	doc += facts(onKey, expiry)
	f.Add(comment(doc))
	f.Func().Params(jen.Id(latchReceiver).Op("*").Id("Latches")).Id(l.Name).Params(signature(l.params)...).
		Op("*").Qual(runtimePath, "Latch").Block(
		jen.Return(jen.Qual(implPath, "NewLatch").Call(
			jen.Id(latchReceiver).Dot("c"),
			jen.Op("&").Id(l.defVar()),
			keyCall(l.keyVar(), l.params),
		)),
	)
	f.Var().Defs(
		jen.Id(l.keyVar()).Op("=").Add(keyDef(ns, l.Object)),
		jen.Id(l.defVar()).Op("=").Add(literal(defs.Latch(l.Latch), jen.Id(latchScriptsVar))),
	)
}
