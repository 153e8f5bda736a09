package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/spec"
)

// RedLock locks are not methods of Locks, which wraps one client: they are
// taken on several independent Redis deployments, so they get a group of
// their own, RedLocks, made from one client per deployment.

// splitRedLocks returns the locks of the section that Locks serves, and
// the redlock ones, each in name order.
func (s *locksSection) splitRedLocks() (plain, red []*lock) {
	for _, l := range s.locks {
		if l.Kind == spec.RedLock {
			red = append(red, l)
		} else {
			plain = append(plain, l)
		}
	}
	return plain, red
}

// renderRedLocks writes the RedLocks type, its constructor and one method
// per redlock lock.
func (s *locksSection) renderRedLocks(g *generator, f *jen.File, red []*lock) {
	if len(red) == 0 {
		return
	}
	src := g.sourceName()
	f.Add(comment("RedLocks gives typed access to the RedLock locks declared in " + src + ":\n" +
		"each is taken on a majority of independent Redis deployments."))
	f.Type().Id("RedLocks").Struct(jen.Id("q").Op("*").Qual(runtimePath, "Quorum"))
	f.Add(comment("NewRedLocks returns the RedLock locks of " + src + " over nodes, one client\n" +
		"per independent Redis deployment: an odd number, typically 5."))
	f.Func().Id("NewRedLocks").Params(jen.Id("nodes").Op("...").Op("*").Qual(runtimePath, "Client")).Op("*").Id("RedLocks").Block(
		jen.Return(jen.Op("&").Id("RedLocks").Values(
			field("q", jen.Qual(runtimePath, "NewQuorum").Call(jen.Id("nodes").Op("..."))),
		)),
	)
	f.Add(comment(redQuorumMethod + " returns the quorum the RedLocks are taken on: its nodes, and\n" +
		"SetNodeTimeout for nodes that may take longer than lockrt.DefaultNodeTimeout\n" +
		"to answer (call it before the first RedLock call)."))
	f.Func().Params(jen.Id(receiver).Op("*").Id("RedLocks")).Id(redQuorumMethod).Params().
		Op("*").Qual(runtimePath, "Quorum").Block(jen.Return(jen.Id(receiver).Dot("q")))
	for _, l := range red {
		g.renderRedLock(f, l)
	}
}

// redQuorumMethod is the RedLocks group's method returning its quorum: no
// redlock may have its name.
const redQuorumMethod = "Quorum"

// renderRedLock writes a redlock lock's method and the definitions it uses.
func (g *generator) renderRedLock(f *jen.File, l *lock) {
	ns := g.spec.Namespace
	doc := l.docText()
	onKey := "RedLock on key " + keyDoc(ns, l.Object) + " on a majority of the nodes,"
	timing := leaseDoc(l.Lock) + ", " + waitDoc(l.Lock) + "."
	doc += facts(onKey, timing)
	f.Add(comment(doc))
	f.Func().Params(jen.Id(receiver).Op("*").Id("RedLocks")).Id(l.Name).Params(signature(l.params)...).
		Op("*").Qual(runtimePath, "RedLock").Block(
		jen.Return(jen.Qual(implPath, "NewRedLock").Call(
			jen.Id(receiver).Dot("q"),
			jen.Op("&").Id(l.defVar()),
			keyCall(l.keyVar(), l.params),
		)),
	)

	f.Var().Defs(
		jen.Id(l.keyVar()).Op("=").Add(keyDef(ns, l.Object)),
		jen.Id(l.defVar()).Op("=").Add(literal(defs.RedLock(l.Lock), jen.Id(lockScriptsVar(l.Kind)))),
	)
}
