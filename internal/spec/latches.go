package spec

import (
	"time"
)

// This file is the latches: section: its row of the kind table, its
// objects' type and the parse function that reads them.

func init() {
	register(&Kind{
		Order:   3,
		Section: "latches", Noun: "latch",
		Example:    `Warmup: { key: "warmup:{job}", params: { job: string }, count: 3 }`,
		Fields:     fieldsOf(Field{"count", Behaviour}, Field{"expire", Behaviour}),
		SpecField:  "Latches",
		parse:      parseLatch,
		Doc:        "A count-down latch: opens after count count-downs.",
		SectionDoc: "Count-down latches by exported Go name.",
		FieldSchemas: map[string]string{
			"count":  `{"$ref": "#/$defs/count", "description": "How many count-downs open the latch."}`,
			"expire": `{"$ref": "#/$defs/duration", "description": "How long the latch key lives after it was set. Default 24h.", "default": "24h"}`,
		},
		Required: []string{"count"},
	})
}

// Latch is an entry of latches:.
type Latch struct {
	Object
	Count  int           `spec:"count"`
	Expire time.Duration `spec:"expire"` // how long a latch key lives after it was set; default 24h
}

func parseLatch(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	l := &Latch{Object: o, Expire: DefaultLatchExpire}
	if v, ok := f.integer("count", 1); ok {
		l.Count = v
	} else {
		f.missing("count", "how many count-downs open the latch, e.g. count: 3")
	}
	if v, ok := f.duration("expire", false); ok {
		l.Expire = v
	}
	k.append(s, l)
}
