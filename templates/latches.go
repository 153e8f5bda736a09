package templates

// The latch script takes the latch's count key; its header states its
// KEYS, ARGV and reply.

// LatchSet names the scripts of count-down latches.
type LatchSet struct {
	CountDown string
}

// Names returns the set's script names in a fixed order.
func (s LatchSet) Names() []string { return []string{s.CountDown} }

// Latch names the scripts of count-down latches.
var Latch = LatchSet{CountDown: "latch_count_down"}
