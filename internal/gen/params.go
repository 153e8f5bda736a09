package gen

import (
	"fmt"
	"go/token"
	"go/types"
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/gotypes"
	"github.com/lockgen/lockgen/internal/spec"
)

// param is a key param as a generated method takes it: a Go parameter
// named after the placeholder.
type param struct {
	spec.Param
	basic string // the underlying basic type: Type.Basic, or what a named type resolved to
	pkg   string // the package name of a named type
}

// object is what every generated object has: the identifier its
// package-level variables are named after, and its params.
type object struct {
	ident  string
	def    string // the name of its definition variable
	params []*param
}

func (o *object) keyVar() string      { return o.ident + "Key" }
func (o *object) paramList() []*param { return o.params }

// paramsOf returns the params of every object in list.
func paramsOf[T interface{ paramList() []*param }](list []T) []*param {
	var ps []*param
	for _, o := range list {
		ps = append(ps, o.paramList()...)
	}
	return ps
}
func (o *object) defVar() string { return o.def }

// newObject names the variables of o (its key, ident+"Key", and its
// definition, ident+kind) and checks that its params can be the Go
// parameters of a method with receiver recv whose body uses those names,
// strconv, and the names in extra.
func (g *generator) newObject(o spec.Object, recv, kind string, extra ...string) object {
	ob := object{ident: g.ident(o.Name)}
	ob.def = ob.ident + kind
	reserved := append([]string{recv, "strconv", ob.keyVar(), ob.def}, extra...)
	for _, p := range o.Key.Params {
		prm := &param{Param: p}
		ob.params = append(ob.params, prm)
		g.checkName(prm, reserved)
	}
	return ob
}

const renameHint = "rename the placeholder and its param: the name is only the Go parameter's, not part of the key"

// checkName reports a param name that cannot be a Go parameter of a
// method whose body uses the names in reserved.
func (g *generator) checkName(p *param, reserved []string) {
	switch {
	case p.Name == "_":
		g.errorAt(p.Pos, renameHint, "param name _ cannot be used as a Go parameter")
	case token.IsKeyword(p.Name):
		g.errorAt(p.Pos, renameHint, "param name %q is a Go keyword", p.Name)
	case types.Universe.Lookup(p.Name) != nil:
		g.errorAt(p.Pos, renameHint, "param name %q would shadow the predeclared identifier %s", p.Name, p.Name)
	default:
		for _, r := range reserved {
			if p.Name == r {
				g.errorAt(p.Pos, renameHint, "param name %q clashes with a name the generated code uses", p.Name)
			}
		}
	}
}

// resolveParams sets the underlying type of every param, resolving all
// named types with one go/packages query, and reports those that do not
// resolve to an integer or string type.
func (g *generator) resolveParams() error {
	var named []gotypes.Type
	seen := map[gotypes.Type]bool{}
	for _, p := range g.params() {
		if !p.Type.Named() {
			p.basic = p.Type.Basic
			continue
		}
		t := gotypes.Type{ImportPath: p.Type.ImportPath, Name: p.Type.TypeName}
		if !seen[t] {
			seen[t] = true
			named = append(named, t)
		}
	}
	// Queue payload types are resolved in the same query.
	payloads := g.payloadTypes()
	if len(named) == 0 && len(payloads) == 0 {
		return nil
	}
	res, err := gotypes.Resolve(g.opts.Dir, gotypes.Query{KeyParams: named, Payloads: payloads})
	if err != nil {
		return fmt.Errorf("gen: resolving param and payload types: %w", err)
	}
	g.resolvedPayloads(res.Payloads)
	results := res.KeyParams
	for _, p := range g.params() {
		if !p.Type.Named() {
			continue
		}
		r := results[gotypes.Type{ImportPath: p.Type.ImportPath, Name: p.Type.TypeName}]
		if r.Err != nil {
			g.errorAt(p.Pos, r.Hint, "%v", r.Err)
			continue
		}
		p.basic, p.pkg = r.Basic, r.Package
	}
	return nil
}

// params returns the params of every object.
func (g *generator) params() []*param {
	var ps []*param
	for _, sec := range g.sections {
		ps = append(ps, sec.params()...)
	}
	return ps
}

func (g *generator) hasNamedParams() bool {
	for _, p := range g.params() {
		if p.Type.Named() {
			return true
		}
	}
	return false
}

// importedPackage is a package the generated code imports for a param type.
type importedPackage struct{ path, name string }

// namedParamPackages returns the packages of the named param types,
// sorted by path.
func (g *generator) namedParamPackages() []importedPackage {
	names := map[string]string{}
	for _, p := range g.params() {
		if p.Type.Named() {
			names[p.Type.ImportPath] = p.pkg
		}
	}
	pkgs := make([]importedPackage, 0, len(names))
	for path, name := range names {
		pkgs = append(pkgs, importedPackage{path, name})
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].path < pkgs[j].path })
	return pkgs
}

// goType is the param's type in the method signature.
func (p *param) goType() jen.Code {
	if p.Type.Named() {
		return jen.Qual(p.Type.ImportPath, p.Type.TypeName)
	}
	return jen.Id(p.Type.Basic)
}

// format returns the expression that formats the param's value as a key
// value: the string itself, or the integer in decimal.
func (p *param) format() jen.Code {
	v := jen.Id(p.Name)
	named := p.Type.Named()
	switch {
	case p.basic == "string" && named:
		return jen.String().Call(v)
	case p.basic == "string":
		return v
	case p.basic == "int" && !named:
		return jen.Qual("strconv", "Itoa").Call(v)
	case strings.HasPrefix(p.basic, "int"):
		if p.basic != "int64" || named {
			v = jen.Int64().Call(v)
		}
		return jen.Qual("strconv", "FormatInt").Call(v, jen.Lit(10))
	default: // an unsigned integer
		if p.basic != "uint64" || named {
			v = jen.Uint64().Call(v)
		}
		return jen.Qual("strconv", "FormatUint").Call(v, jen.Lit(10))
	}
}
