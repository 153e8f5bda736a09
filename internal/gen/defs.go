package gen

import (
	"fmt"
	"reflect"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// A generated file's definitions are the values package defs builds from
// the spec (the one path from spec to definition, which lockgen inspect
// takes at run time too), rendered as Go literals: literal.

// constNames names the runtime's constants a definition holds.
var constNames = map[any]string{
	lockimpl.Reentrant: "Reentrant", lockimpl.Simple: "Simple", lockimpl.Fair: "Fair",
	lockimpl.ReadWrite: "ReadWrite", lockimpl.Fenced: "Fenced",
	lockimpl.GCRA: "GCRA", lockimpl.TokenBucket: "TokenBucket", lockimpl.SlidingWindow: "SlidingWindow",
	lockimpl.ScopeOverall: "ScopeOverall", lockimpl.ScopePerClient: "ScopePerClient",
	lockimpl.CatchUpLatest: "CatchUpLatest", lockimpl.CatchUpAll: "CatchUpAll",
}

// literal renders a definition (a pointer to a lockimpl.XDef) as the
// composite literal lockimpl.XDef{...}, one field a line, each left out
// when zero; its Scripts field is scripts (the file's pinned set).
func literal(def any, scripts jen.Code) jen.Code {
	return structLiteral(reflect.Indirect(reflect.ValueOf(def)), scripts, multiline)
}

func structLiteral(v reflect.Value, scripts jen.Code, opts jen.Options) jen.Code {
	t := v.Type()
	var fs []jen.Code
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if !f.IsExported() || fv.IsZero() {
			continue
		}
		if f.Name == "Scripts" {
			fs = append(fs, field(f.Name, scripts))
			continue
		}
		fs = append(fs, field(f.Name, valueOf(fv)))
	}
	return jen.Qual(implPath, t.Name()).Custom(opts, fs...)
}

// valueOf renders one field's value.
func valueOf(v reflect.Value) jen.Code {
	if v.Comparable() {
		if name, ok := constNames[v.Interface()]; ok {
			return jen.Qual(implPath, name)
		}
	}
	switch x := v.Interface().(type) {
	case time.Duration:
		return durationExpr(x)
	case []string:
		lits := make([]jen.Code, len(x))
		for i, s := range x {
			lits[i] = jen.Lit(s)
		}
		return jen.Index().String().Values(lits...)
	}
	switch v.Kind() {
	case reflect.String:
		return jen.Lit(v.String())
	case reflect.Int:
		return jen.Lit(int(v.Int()))
	case reflect.Bool:
		return jen.Lit(v.Bool())
	case reflect.Struct:
		return structLiteral(v, nil, jen.Options{Open: "{", Close: "}", Separator: ","})
	}
	panic(fmt.Sprintf("gen: a definition's field of type %s has no rendering", v.Type()))
}

// field is a key: value element of a composite literal.
func field(name string, value jen.Code) jen.Code {
	return jen.Id(name).Op(":").Add(value)
}
