package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/spec"
)

// latchesSection generates the latches: section. It is not supported yet: every
// object in it is reported.
type latchesSection struct{}

func (*latchesSection) collect(g *generator) {
	g.unsupported("latches", "#4", objects(g.spec.Latches, func(o *spec.Latch) spec.Object { return o.Object }))
}

func (*latchesSection) params() []*param { return nil }

func (*latchesSection) scripts() []string { return nil }

func (*latchesSection) render(*generator, *jen.File) {}
