package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
)

// keyDef is the lockimpl.KeyDef literal of an object's key.
func keyDef(namespace string, o spec.Object) jen.Code {
	lits := make([]jen.Code, len(o.Key.Literals))
	for i, l := range o.Key.Literals {
		lits[i] = jen.Lit(l)
	}
	return jen.Qual(implPath, "KeyDef").Values(
		field("Namespace", jen.Lit(namespace)),
		field("Object", jen.Lit(o.Identity())),
		field("Literals", jen.Index().String().Values(lits...)),
	)
}

// keyDoc shows an object's keys in prose, with <param> for each value:
// shop:{Order:order:<orderID>}, the key package keys builds for those
// values.
func keyDoc(namespace string, o spec.Object) string {
	values := make([]string, len(o.Key.Params))
	for i, p := range o.Key.Params {
		values[i] = "<" + p.Name + ">"
	}
	return keys.Build(namespace, o.Identity(), o.Key.Literals, values...)
}

// keyCall is the expression that builds an instance's key from the params
// of the method: orderKey.Key(strconv.FormatInt(orderID, 10)). Three or
// more values go one per line.
func keyCall(keyVar string, params []*param) jen.Code {
	values := make([]jen.Code, len(params))
	for i, p := range params {
		values[i] = p.format()
	}
	call := jen.Id(keyVar).Dot("Key")
	if len(values) < 3 {
		return call.Call(values...)
	}
	return call.Custom(jen.Options{Open: "(", Close: ")", Separator: ",", Multi: true}, values...)
}
