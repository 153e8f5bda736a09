package gen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/templates"
)

// lockKinds maps each lock kind lockgen generates to its runtime constant.
// Every kind here has its scripts in templates.Locks.
var lockKinds = map[spec.LockKind]string{
	spec.Reentrant: "Reentrant",
	spec.Simple:    "Simple",
}

// receiver is the receiver of the methods of Locks.
const receiver = "l"

// lock is a lock as generated.
type lock struct {
	*spec.Lock
	ident  string // what its package-level variables are named after
	params []*param
}

func (l *lock) keyVar() string { return l.ident + "Key" }
func (l *lock) defVar() string { return l.ident + "Lock" }

// collectLocks sets g.locks from the spec and checks their param names.
func (g *generator) collectLocks() {
	used := map[string]bool{}
	for _, sl := range g.spec.Locks {
		ident := lowerCamel(sl.Name)
		for i := 2; used[ident]; i++ { // Order and ORDER are both "order"
			ident = fmt.Sprintf("%s%d", lowerCamel(sl.Name), i)
		}
		used[ident] = true
		l := &lock{Lock: sl, ident: ident}
		reserved := []string{receiver, "strconv", l.keyVar(), l.defVar()}
		for _, p := range sl.Key.Params {
			l.params = append(l.params, &param{Param: p})
			g.checkName(l.params[len(l.params)-1], reserved)
		}
		g.locks = append(g.locks, l)
	}
}

// lockScriptsVar names the lockrt.LockScripts of a kind.
func lockScriptsVar(kind spec.LockKind) string { return string(kind) + "LockScripts" }

// lockKindsUsed returns the kinds of the locks, each once, sorted.
func (g *generator) lockKindsUsed() []spec.LockKind {
	seen := map[spec.LockKind]bool{}
	var kinds []spec.LockKind
	for _, l := range g.locks {
		if !seen[l.Kind] {
			seen[l.Kind] = true
			kinds = append(kinds, l.Kind)
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	return kinds
}

// renderLocks writes the Locks type and one method per lock.
func (g *generator) renderLocks(f *jen.File) {
	src := g.sourceName()
	client := jen.Op("*").Qual(runtimePath, "Client")
	f.Add(comment("Locks gives typed access to the locks declared in " + src + "."))
	f.Type().Id("Locks").Struct(jen.Id("c").Add(client))
	f.Add(comment("NewLocks returns the locks of " + src + " over c."))
	f.Func().Id("NewLocks").Params(jen.Id("c").Add(client)).Op("*").Id("Locks").Block(
		jen.Return(jen.Op("&").Id("Locks").Values(field("c", jen.Id("c")))),
	)
	for _, l := range g.locks {
		g.renderLock(f, l)
	}
	for _, kind := range g.lockKindsUsed() {
		set := templates.Locks[string(kind)]
		f.Add(comment(fmt.Sprintf("%s are the scripts of %s locks.", lockScriptsVar(kind), kind)))
		f.Var().Id(lockScriptsVar(kind)).Op("=").Qual(runtimePath, "LockScripts").Custom(multiline,
			field("Acquire", jen.Op("&").Id(scriptVar(set.Acquire))),
			field("Release", jen.Op("&").Id(scriptVar(set.Release))),
			field("Renew", jen.Op("&").Id(scriptVar(set.Renew))),
			field("ForceUnlock", jen.Op("&").Id(scriptVar(set.ForceUnlock))),
		)
	}
}

// multiline renders a composite literal with one element per line.
var multiline = jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}

// renderLock writes a lock's method and the definitions it uses.
func (g *generator) renderLock(f *jen.File, l *lock) {
	ns := g.spec.Namespace
	var names []string
	for _, p := range l.params {
		names = append(names, p.Name)
	}
	fallback := l.Name + " returns the " + l.Name + " lock"
	if len(names) > 0 {
		fallback += " for the given " + list(names)
	}
	doc := docComment(l.Name, l.Description, fallback+".")
	// The facts a reader of the call site wants, wrapped after the key
	// when the line would be long.
	onKey := capitalize(string(l.Kind)) + " lock on key " + keyDoc(ns, l.Object) + ","
	timing := leaseDoc(l.Lock) + ", " + waitDoc(l.Lock) + "."
	if len(onKey)+1+len(timing) <= 100 {
		doc += "\n\n" + onKey + " " + timing
	} else {
		doc += "\n\n" + onKey + "\n" + timing
	}
	f.Add(comment(doc))
	f.Func().Params(jen.Id(receiver).Op("*").Id("Locks")).Id(l.Name).Params(signature(l.params)...).
		Op("*").Qual(runtimePath, "Lock").Block(
		jen.Return(jen.Id(receiver).Dot("c").Dot("Lock").Call(
			jen.Op("&").Id(l.defVar()),
			keyCall(l.keyVar(), l.params),
		)),
	)

	def := []jen.Code{
		field("Name", jen.Lit(l.Name)),
		field("Kind", jen.Qual(runtimePath, lockKinds[l.Kind])),
	}
	if l.Lease != 0 {
		def = append(def, field("Lease", durationExpr(l.Lease)))
	}
	if l.Renew {
		def = append(def, field("Renew", jen.True()))
	}
	if l.Wait != 0 {
		def = append(def, field("Wait", durationExpr(l.Wait)))
	}
	def = append(def, field("Scripts", jen.Op("&").Id(lockScriptsVar(l.Kind))))
	f.Var().Defs(
		jen.Id(l.keyVar()).Op("=").Add(keyDef(ns, l.Object)),
		jen.Id(l.defVar()).Op("=").Qual(runtimePath, "LockDef").Custom(multiline, def...),
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

func leaseDoc(l *spec.Lock) string {
	if l.Renew {
		return "lease " + humanDuration(l.Lease) + " renewed while held"
	}
	return "fixed lease " + humanDuration(l.Lease)
}

func waitDoc(l *spec.Lock) string {
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
