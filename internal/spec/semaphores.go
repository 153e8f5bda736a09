package spec

import (
	"time"
)

// This file is the semaphores: section: its row of the kind table, its
// objects' type and the parse function that reads them.

func init() {
	register(&Kind{
		Order:   2,
		Section: "semaphores", Noun: "semaphore",
		Example:    `Export: { key: "export:{tenant}", params: { tenant: string }, permits: 4 }`,
		Fields:     fieldsOf(Field{"permits", Behaviour}, Field{"lease", Behaviour}, Field{"renew", Behaviour}, Field{"wait", Behaviour}),
		SpecField:  "Semaphores",
		parse:      parseSemaphore,
		Doc:        "A distributed semaphore: at most permits holders at once.",
		SectionDoc: "Semaphores by exported Go name.",
		FieldSchemas: map[string]string{
			"permits": `{"$ref": "#/$defs/count", "description": "How many may hold it at once."}`,
			"lease":   `{"$ref": "#/$defs/duration", "description": "TTL of a permit while held. Default defaults.lease."}`,
			"renew":   `{"type": "boolean", "default": true, "description": "Whether the watchdog extends held permits. Default true."}`,
			"wait":    `{"$ref": "#/$defs/wait", "description": "Default wait of Acquire; 0 means try once. Default defaults.wait."}`,
		},
		Required: []string{"permits"},
	})
}

// Semaphore is an entry of semaphores:.
type Semaphore struct {
	Object
	Permits int           `spec:"permits"`
	Lease   time.Duration `spec:"lease"`
	Renew   bool          `spec:"renew"`
	Wait    time.Duration `spec:"wait"`
}

func parseSemaphore(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	m := &Semaphore{Object: o, Lease: s.Defaults.Lease, Renew: true, Wait: s.Defaults.Wait}
	if v, ok := f.integer("permits", 1); ok {
		m.Permits = v
	} else {
		f.missing("permits", "how many may hold it at once, e.g. permits: 4")
	}
	f.hold(&m.Lease, &m.Renew, &m.Wait)
	k.append(s, m)
}
