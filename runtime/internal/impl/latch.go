package impl

import (
	"time"
)

// LatchScripts are the scripts of count-down latches. The latch script
// takes the latch's count key; its header states its KEYS, ARGV and
// reply.
type LatchScripts struct {
	CountDown *Script
}

// LatchDef is the static definition of a count-down latch declared in a
// spec.
type LatchDef struct {
	Name    string        // the spec's name, for errors
	Count   int           // the count of a latch nobody set with TrySetCount
	Expire  time.Duration // how long a latch's key lives after it was set
	Scripts *LatchScripts
}

// NewLatch makes a count-down latch (runtime.Client's).
var NewLatch func(c any, def *LatchDef, key string) any

// Latches returns the scripts of count-down latches.
func (p *Pinned) Latches() *LatchScripts {
	return &LatchScripts{CountDown: p.get("latch_count_down")}
}
