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

// receiver is the receiver of the methods of Locks.
const receiver = "l"

// lock is a lock as generated.
type lock struct {
	*spec.Lock
	object
}

// locksSection generates the locks: section.
type locksSection struct {
	locks []*lock // sorted by name
}

func init() { registerSection("locks", func() section { return &locksSection{} }) }

// collect keeps the spec's locks, reports kinds not supported yet and
// checks param names.
func (s *locksSection) collect(g *generator) {
	for _, sl := range g.spec.Locks {
		if _, ok := defs.LockKinds[sl.Kind]; !ok && sl.Kind != spec.RedLock {
			pos := sl.KindPos
			if pos.Line == 0 {
				pos = sl.Pos
			}
			g.errorAt(pos, "this lockgen generates "+list(supportedLockKinds()), "lock kind %q is not supported by this lockgen", sl.Kind)
		}
		if sl.Kind == spec.RedLock && sl.Name == redQuorumMethod {
			g.errorAt(sl.Pos, "rename the lock: the RedLocks group's Quorum method returns its quorum",
				"redlock name %q clashes with the RedLocks group's method %s", sl.Name, redQuorumMethod)
		}
		l := &lock{Lock: sl, object: g.newObject(sl.Object, receiver, "Lock")}
		s.locks = append(s.locks, l)
	}
}

// params returns the params of every lock.
func (s *locksSection) params() []*param {
	return paramsOf(s.locks)
}

// scripts returns the scripts of the lock kinds used.
func (s *locksSection) scripts() []string {
	var names []string
	for _, kind := range s.kindsUsed() {
		set := lockimpl.Scripts().RedLocks()
		if kind != spec.RedLock {
			set = lockimpl.Scripts().Locks(defs.LockKinds[kind])
		}
		names = append(names, lockimpl.ScriptNames(set)...)
	}
	return names
}

// lockScriptsVar names the lockimpl.LockScripts of a kind.
func lockScriptsVar(kind spec.LockKind) string { return string(kind) + "LockScripts" }

// scriptKind returns the kind whose scripts a lock of kind runs: a
// leader's are a fenced lock's.
func scriptKind(kind spec.LockKind) spec.LockKind {
	if kind == spec.Leader {
		return spec.Fenced
	}
	return kind
}

// kindsUsed returns the kinds of the locks' scripts, each once, sorted.
func (s *locksSection) kindsUsed() []spec.LockKind {
	seen := map[spec.LockKind]bool{}
	var kinds []spec.LockKind
	for _, l := range s.locks {
		if k := scriptKind(l.Kind); !seen[k] {
			seen[k] = true
			kinds = append(kinds, k)
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	return kinds
}

// render writes the Locks type and one method per lock.
func (s *locksSection) render(g *generator, f *jen.File) {
	if len(s.locks) == 0 {
		return
	}
	src := g.sourceName()
	client := jen.Op("*").Qual(runtimePath, "Client")
	plain, red := s.splitRedLocks()
	if len(plain) > 0 {
		f.Add(comment("Locks gives typed access to the locks declared in " + src + "."))
		f.Type().Id("Locks").Struct(jen.Id("c").Add(client))
		f.Add(comment("NewLocks returns the locks of " + src + " over c."))
		f.Func().Id("NewLocks").Params(jen.Id("c").Add(client)).Op("*").Id("Locks").Block(
			jen.Return(jen.Op("&").Id("Locks").Values(field("c", jen.Id("c")))),
		)
	}
	for _, l := range plain {
		g.renderLock(f, l)
	}
	s.renderRedLocks(g, f, red)
	for _, kind := range s.kindsUsed() {
		f.Add(comment(fmt.Sprintf("%s are the runtime's scripts of %s locks.", lockScriptsVar(kind), kind)))
		set := jen.Id(pinnedVar).Dot("RedLocks").Call()
		if k, ok := defs.LockKinds[kind]; ok {
			set = jen.Id(pinnedVar).Dot("Locks").Call(valueOf(reflect.ValueOf(k)))
		}
		f.Var().Id(lockScriptsVar(kind)).Op("=").Add(set)
	}
}

// multiline renders a composite literal with one element per line.
var multiline = jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}

// docText is the start of the doc comment of a lock's method (any kind,
// RedLock too): the spec's description, or what the method returns.
func (l *lock) docText() string {
	var names []string
	for _, p := range l.params {
		names = append(names, p.Name)
	}
	fallback := l.Name + " returns the " + l.Name + " lock"
	if len(names) > 0 {
		fallback += " for the given " + list(names)
	}
	return docComment(l.Name, l.Description, fallback+".")
}

// renderLock writes a lock's method and the definitions it uses.
func (g *generator) renderLock(f *jen.File, l *lock) {
	ns := g.spec.Namespace
	doc := l.docText()
	onKey := kindDoc(l.Kind) + " on key " + keyDoc(ns, l.Object) + ","
	timing := leaseDoc(l.Lock) + ", " + waitDoc(l.Lock) + "."
	doc += facts(onKey, timing)
	if note := kindNote(l.Kind); note != "" {
		doc += "\n" + note
	}
	f.Add(comment(doc))
	// A read-write lock is a pair of locks, its Read and Write sides.
	typ := "Lock"
	switch l.Kind {
	case spec.ReadWrite:
		typ = "RWLock"
	case spec.Leader: // a fenced lock, campaigned for
		typ = "Election"
	}
	f.Func().Params(jen.Id(receiver).Op("*").Id("Locks")).Id(l.Name).Params(signature(l.params)...).
		Op("*").Qual(runtimePath, typ).Block(
		jen.Return(jen.Qual(implPath, "New"+typ).Call(
			jen.Id(receiver).Dot("c"),
			jen.Op("&").Id(l.defVar()),
			keyCall(l.keyVar(), l.params),
		)),
	)

	f.Var().Defs(
		jen.Id(l.keyVar()).Op("=").Add(keyDef(ns, l.Object)),
		jen.Id(l.defVar()).Op("=").Add(literal(defs.Lock(l.Lock), jen.Id(lockScriptsVar(scriptKind(l.Kind))))),
	)
}

// signature returns the parameters of a method, with consecutive params
// of one type sharing it: (tenant, region string, shard uint32).
func signature(params []*param) []jen.Code {
	var out []jen.Code
	for i, p := range params {
		id := jen.Id(p.Name)
		if i == len(params)-1 || params[i+1].Type != p.Type {
			id.Add(p.goType())
		}
		out = append(out, id)
	}
	return out
}

// kindDoc names a lock kind in a doc comment: "Reentrant lock".
func kindDoc(kind spec.LockKind) string {
	switch kind {
	case spec.ReadWrite:
		return "Read-write lock"
	case spec.Leader:
		return "Leader election"
	}
	return capitalize(string(kind)) + " lock"
}

// kindNote is what a caller must know about a kind, for its doc comment.
func kindNote(kind spec.LockKind) string {
	switch kind {
	case spec.Fair:
		return "Waiters get it in arrival order."
	case spec.ReadWrite:
		return "Read() is shared, Write() is exclusive."
	case spec.Fenced:
		return "Pass each lease's Token() to the storage it guards."
	case spec.Leader:
		return "Campaign blocks until this process leads; pass the leadership's Epoch() to the storage it guards."
	}
	return ""
}

func leaseDoc(l *spec.Lock) string {
	if l.Renew {
		return "lease " + humanDuration(l.Lease) + " renewed while held"
	}
	return "fixed lease " + humanDuration(l.Lease)
}

func waitDoc(l *spec.Lock) string {
	if l.Kind == spec.Leader {
		return "Campaign waits as long as its context allows"
	}
	if l.Wait == 0 {
		return "no default wait"
	}
	return "default wait " + humanDuration(l.Wait)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// supportedLockKinds returns the lock kinds this generator knows, in the
// spec's order.
func supportedLockKinds() []string {
	var kinds []string
	for _, k := range spec.LockKinds {
		if _, ok := defs.LockKinds[k]; ok || k == spec.RedLock {
			kinds = append(kinds, string(k))
		}
	}
	return kinds
}
