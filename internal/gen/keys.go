package gen

import (
	"reflect"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/keys"
	"github.com/lockgen/lockgen/internal/spec"
)

// keyDef is the lockimpl.KeyDef literal of an object's key (defs.Key),
// every field written.
func keyDef(namespace string, o spec.Object) jen.Code {
	k := defs.Key(namespace, o)
	return jen.Qual(implPath, "KeyDef").Values(
		field("Namespace", jen.Lit(k.Namespace)),
		field("Object", jen.Lit(k.Object)),
		field("Literals", valueOf(reflect.ValueOf(k.Literals))),
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
