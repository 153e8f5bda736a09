// Package diff computes line-based unified diffs, for lockgen check to
// show how a file on disk differs from what lockgen would generate.
//
// It uses Myers' O(ND) algorithm ("An O(ND) Difference Algorithm and Its
// Variations", 1986), which finds a shortest edit script; the output is
// the unified format of diff -u, with three lines of context.
package diff

import (
	"bytes"
	"fmt"
	"strings"
)

// context is the number of unchanged lines shown around each change.
const context = 3

// Unified returns the unified diff that turns old into new, with headers
// "--- oldName" and "+++ newName", or nil when they are equal. A last line
// without a newline is marked "\ No newline at end of file", as diff does.
func Unified(oldName, newName string, old, new []byte) []byte {
	if bytes.Equal(old, new) {
		return nil
	}
	a, b := splitLines(old), splitLines(new)
	ops := edits(a, b)
	var out bytes.Buffer
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldName, newName)
	for _, h := range hunks(ops) {
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", span(h.oldStart, h.oldLines), span(h.newStart, h.newLines))
		for _, o := range ops[h.from:h.to] {
			out.WriteByte(o.kind)
			out.WriteString(o.line)
			if !strings.HasSuffix(o.line, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
	return out.Bytes()
}

// splitLines splits text after each newline; the last line may lack one.
func splitLines(text []byte) []string {
	var lines []string
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n') + 1
		if i == 0 {
			i = len(text)
		}
		lines = append(lines, string(text[:i]))
		text = text[i:]
	}
	return lines
}

// An op is one line of an edit script: kept (' '), deleted ('-') or
// inserted ('+').
type op struct {
	kind byte
	line string
}

// edits returns a shortest edit script from a to b.
func edits(a, b []string) []op {
	n, m := len(a), len(b)
	// v[off+k] is the furthest x reached on diagonal k = x-y; trace[d]
	// keeps v[off-d:off+d+1] as it was after round d, for backtracking.
	off := n + m + 1
	v := make([]int, 2*off+1)
	var trace [][]int
	x, y, d := 0, 0, 0
search:
	for d = 0; d <= n+m; d++ {
		for k := -d; k <= d; k += 2 {
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1] // down: insert b[y]
			} else {
				x = v[off+k-1] + 1 // right: delete a[x]
			}
			y = x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				break search
			}
		}
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
	}

	// Walk back from (n, m) to (0, 0), collecting ops in reverse.
	var rev []op
	x, y = n, m
	for ; d > 0; d-- {
		prev := trace[d-1] // prev[k+d-1] is v[k] after round d-1
		k := x - y
		var pk int
		if k == -d || k != d && prev[k-1+d-1] < prev[k+1+d-1] {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := prev[pk+d-1]
		py := px - pk
		for x > px && y > py {
			rev = append(rev, op{' ', a[x-1]})
			x, y = x-1, y-1
		}
		if x == px {
			rev = append(rev, op{'+', b[y-1]})
		} else {
			rev = append(rev, op{'-', a[x-1]})
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		rev = append(rev, op{' ', a[x-1]})
		x, y = x-1, y-1
	}
	ops := make([]op, len(rev))
	for i, o := range rev {
		ops[len(rev)-1-i] = o
	}
	return ops
}

// A hunk is ops[from:to], covering lines from oldStart and newStart
// (1-based; the line before the hunk when it has no lines on that side).
type hunk struct {
	from, to           int
	oldStart, oldLines int
	newStart, newLines int
}

// hunks groups the changes of ops with their context; changes closer
// than twice the context share a hunk.
func hunks(ops []op) []hunk {
	var hs []hunk
	oldLine, newLine := 0, 0 // lines of each side before ops[i]
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			oldLine, newLine, i = oldLine+1, newLine+1, i+1
			continue
		}
		// A change at i: start the hunk up to context lines before it.
		lead := 0
		for lead < context && i-lead-1 >= 0 && ops[i-lead-1].kind == ' ' {
			lead++
		}
		h := hunk{from: i - lead, oldStart: oldLine - lead, newStart: newLine - lead}
		j, equal := i, 0 // equal counts the unchanged lines since the last change
		for ; j < len(ops) && equal <= 2*context; j++ {
			if ops[j].kind == ' ' {
				equal++
			} else {
				equal = 0
			}
		}
		h.to = j - max(equal-context, 0)
		for _, o := range ops[h.from:h.to] {
			if o.kind != '+' {
				h.oldLines++
			}
			if o.kind != '-' {
				h.newLines++
			}
		}
		if h.oldLines > 0 {
			h.oldStart++
		}
		if h.newLines > 0 {
			h.newStart++
		}
		hs = append(hs, h)
		for _, o := range ops[i:h.to] {
			if o.kind != '+' {
				oldLine++
			}
			if o.kind != '-' {
				newLine++
			}
		}
		i = h.to
	}
	return hs
}

// span formats a hunk's range as diff -u does: "3" for one line, "3,4"
// otherwise.
func span(start, lines int) string {
	if lines == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, lines)
}
