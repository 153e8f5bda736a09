package gen

import (
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/spec"
)

// holdFields are the Lease, Renew and Wait fields of a definition of
// something held (a lock, a semaphore), each left out when zero.
func holdFields(lease time.Duration, renew bool, wait time.Duration) []jen.Code {
	var fs []jen.Code
	if lease != 0 {
		fs = append(fs, field("Lease", durationExpr(lease)))
	}
	if renew {
		fs = append(fs, field("Renew", jen.True()))
	}
	if wait != 0 {
		fs = append(fs, field("Wait", durationExpr(wait)))
	}
	return fs
}

// field is a key: value element of a composite literal.
func field(name string, value jen.Code) jen.Code {
	return jen.Id(name).Op(":").Add(value)
}

// keyDef is the lockrt.KeyDef literal of an object's key.
func keyDef(namespace string, o spec.Object) jen.Code {
	lits := make([]jen.Code, len(o.Key.Literals))
	for i, l := range o.Key.Literals {
		lits[i] = jen.Lit(l)
	}
	return jen.Qual(runtimePath, "KeyDef").Values(
		field("Namespace", jen.Lit(namespace)),
		field("Object", jen.Lit(o.Identity())),
		field("Literals", jen.Index().String().Values(lits...)),
	)
}

// keyDoc shows an object's keys in prose, with <param> for each value:
// shop:{Order:order:<orderID>} (see package keys for the encoding).
func keyDoc(namespace string, o spec.Object) string {
	var b strings.Builder
	b.WriteString(namespace + ":{" + o.Identity() + ":")
	for i, l := range o.Key.Literals {
		b.WriteString(l)
		if i < len(o.Key.Params) {
			b.WriteString("<" + o.Key.Params[i].Name + ">")
		}
	}
	b.WriteString("}")
	return b.String()
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
