package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/spec"
)

// semaphoresSection generates the semaphores: section. It is not supported yet: every
// object in it is reported.
type semaphoresSection struct{}

func (*semaphoresSection) collect(g *generator) {
	g.unsupported("semaphores", "#4", objects(g.spec.Semaphores, func(o *spec.Semaphore) spec.Object { return o.Object }))
}

func (*semaphoresSection) params() []*param { return nil }

func (*semaphoresSection) scripts() []string { return nil }

func (*semaphoresSection) render(*generator, *jen.File) {}
