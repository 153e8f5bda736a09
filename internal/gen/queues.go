package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/spec"
)

// queuesSection generates the queues: section. It is not supported yet: every
// object in it is reported.
type queuesSection struct{}

func (*queuesSection) collect(g *generator) {
	g.unsupported("queues", "#6", objects(g.spec.Queues, func(o *spec.Queue) spec.Object { return o.Object }))
}

func (*queuesSection) params() []*param { return nil }

func (*queuesSection) scripts() []string { return nil }

func (*queuesSection) render(*generator, *jen.File) {}
