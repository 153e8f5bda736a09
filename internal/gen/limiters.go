package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/spec"
)

// limitersSection generates the limiters: section. It is not supported yet: every
// object in it is reported.
type limitersSection struct{}

func (*limitersSection) collect(g *generator) {
	g.unsupported("limiters", "#5", objects(g.spec.Limiters, func(o *spec.Limiter) spec.Object { return o.Object }))
}

func (*limitersSection) params() []*param { return nil }

func (*limitersSection) scripts() []string { return nil }

func (*limitersSection) render(*generator, *jen.File) {}
