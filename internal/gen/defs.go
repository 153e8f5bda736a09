package gen

import (
	"time"

	"github.com/dave/jennifer/jen"
)

// The elements of the definition literals (lockimpl.LockDef{...} and the
// like) that several kinds share.

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
