package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// semaphoreReceiver is the receiver of the methods of Semaphores.
const semaphoreReceiver = "s"

// semaphoreScriptsVar names the lockrt.SemaphoreScripts of the file.
const semaphoreScriptsVar = "semaphoreScripts"

// semaphore is a semaphore as generated.
type semaphore struct {
	*spec.Semaphore
	object
}

// semaphoresSection generates the semaphores: section.
type semaphoresSection struct {
	semaphores []*semaphore // sorted by name
}

func init() { registerSection("semaphores", func() section { return &semaphoresSection{} }) }

// collect keeps the spec's semaphores and checks param names.
func (sec *semaphoresSection) collect(g *generator) {
	for _, ss := range g.spec.Semaphores {
		s := &semaphore{Semaphore: ss, object: g.newObject(ss.Object, semaphoreReceiver, "Semaphore")}
		sec.semaphores = append(sec.semaphores, s)
	}
}

// params returns the params of every semaphore.
func (sec *semaphoresSection) params() []*param {
	return paramsOf(sec.semaphores)
}

// scripts returns the semaphore scripts when there is a semaphore.
func (sec *semaphoresSection) scripts() []string {
	if len(sec.semaphores) == 0 {
		return nil
	}
	return lockimpl.ScriptNames(lockimpl.Scripts().Semaphores())
}

// render writes the Semaphores type, one method per semaphore and the
// scripts they share.
func (sec *semaphoresSection) render(g *generator, f *jen.File) {
	if len(sec.semaphores) == 0 {
		return
	}
	src := g.sourceName()
	client := jen.Op("*").Qual(runtimePath, "Client")
	f.Add(comment("Semaphores gives typed access to the semaphores declared in " + src + "."))
	f.Type().Id("Semaphores").Struct(jen.Id("c").Add(client))
	f.Add(comment("NewSemaphores returns the semaphores of " + src + " over c."))
	f.Func().Id("NewSemaphores").Params(jen.Id("c").Add(client)).Op("*").Id("Semaphores").Block(
		jen.Return(jen.Op("&").Id("Semaphores").Values(field("c", jen.Id("c")))),
	)
	for _, s := range sec.semaphores {
		g.renderSemaphore(f, s)
	}
	f.Add(comment(semaphoreScriptsVar + " are the runtime's scripts of semaphores."))
	f.Var().Id(semaphoreScriptsVar).Op("=").Id(pinnedVar).Dot("Semaphores").Call()
}

// renderSemaphore writes a semaphore's method and the definitions it uses.
func (g *generator) renderSemaphore(f *jen.File, s *semaphore) {
	ns := g.spec.Namespace
	var names []string
	for _, p := range s.params {
		names = append(names, p.Name)
	}
	fallback := s.Name + " returns the " + s.Name + " semaphore"
	if len(names) > 0 {
		fallback += " for the given " + list(names)
	}
	doc := docComment(s.Name, s.Description, fallback+".")
	permits := "1 permit"
	if s.Permits != 1 {
		permits = fmt.Sprintf("%d permits", s.Permits)
	}
	onKey := "Semaphore of " + permits + " on key " + keyDoc(ns, s.Object) + ","
	lease := "fixed lease " + humanDuration(s.Lease)
	if s.Renew {
		lease = "lease " + humanDuration(s.Lease) + " renewed while held"
	}
	wait := "no default wait"
	if s.Wait != 0 {
		wait = "default wait " + humanDuration(s.Wait)
	}
	timing := lease + ", " + wait + "."
	doc += facts(onKey, timing)
	f.Add(comment(doc))
	f.Func().Params(jen.Id(semaphoreReceiver).Op("*").Id("Semaphores")).Id(s.Name).Params(signature(s.params)...).
		Op("*").Qual(runtimePath, "Semaphore").Block(
		jen.Return(jen.Qual(implPath, "NewSemaphore").Call(
			jen.Id(semaphoreReceiver).Dot("c"),
			jen.Op("&").Id(s.defVar()),
			keyCall(s.keyVar(), s.params),
		)),
	)

	f.Var().Defs(
		jen.Id(s.keyVar()).Op("=").Add(keyDef(ns, s.Object)),
		jen.Id(s.defVar()).Op("=").Add(literal(defs.Semaphore(s.Semaphore), jen.Id(semaphoreScriptsVar))),
	)
}
