package spec

import (
	"slices"
	"strings"
)

// Diagnostic is one problem in a spec.
type Diagnostic struct {
	Pos  Pos    // where the problem is; Line and Col are at least 1
	Msg  string // what is wrong
	Hint string // how to fix it, one line; may be empty
}

// String formats d as "file:line:col: msg (hint)", or "file:line:col: msg"
// when d has no hint.
func (d Diagnostic) String() string {
	if d.Hint == "" {
		return d.Pos.String() + ": " + d.Msg
	}
	return d.Pos.String() + ": " + d.Msg + " (" + d.Hint + ")"
}

// Diagnostics is every problem found in a spec, sorted by position. It
// implements error.
type Diagnostics []Diagnostic

// Error returns the diagnostics one per line, without a final newline.
func (ds Diagnostics) Error() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Sort orders ds by file, line and column, keeping the order in which
// problems at one position were found.
func (ds Diagnostics) Sort() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int { return comparePos(a.Pos, b.Pos) })
}

// comparePos orders positions by file, line and column.
func comparePos(a, b Pos) int {
	switch {
	case a.File != b.File:
		return strings.Compare(a.File, b.File)
	case a.Line != b.Line:
		return a.Line - b.Line
	default:
		return a.Col - b.Col
	}
}
