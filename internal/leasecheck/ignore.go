package leasecheck

import (
	"go/ast"
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// IgnoreDirective silences leasecheck's findings deliberately, with a
// reason, on the line it ends or, written alone on its line, on the next
// line:
//
//	lease, err := l.Lock(ctx) //lockgen:ignore released by the batch's Close
//
//	//lockgen:ignore the cleanup job must finish even if the lock is lost
//	err = cleanup(ctx)
//
// A finding that a hold is not released on every path is silenced by the
// directive at the statement that obtains the hold or at the return
// statement reported with it. A directive without a reason, and one that
// silences nothing, are reported themselves.
const IgnoreDirective = "//lockgen:ignore"

// ignore is one IgnoreDirective comment.
type ignore struct {
	comment *ast.Comment
	file    *token.File
	line    int  // the first line it silences
	alone   bool // alone on its line: it silences the next line too
	used    bool
}

// reporter reports diagnostics that no ignore directive silences.
type reporter struct {
	pass    *analysis.Pass
	ignores []*ignore
}

// collectIgnores finds the ignore directives of files, reporting those
// without a reason.
func collectIgnores(pass *analysis.Pass, files []*ast.File) []*ignore {
	var out []*ignore
	for _, f := range files {
		tf := pass.Fset.File(f.Pos())
		first := codeColumns(pass.Fset, f)
		for _, g := range f.Comments {
			for _, c := range g.List {
				rest, ok := strings.CutPrefix(c.Text, IgnoreDirective)
				if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
					continue
				}
				if strings.TrimSpace(rest) == "" {
					pass.Reportf(c.Pos(), "%s needs a reason: %s <why this finding is deliberate>", IgnoreDirective, IgnoreDirective)
					continue
				}
				pos := pass.Fset.Position(c.Pos())
				col, code := first[pos.Line]
				out = append(out, &ignore{comment: c, file: tf, line: pos.Line, alone: !code || col > pos.Column})
			}
		}
	}
	return out
}

// codeColumns returns, per line of f, the column of its first token
// outside comments (as far as the syntax tree's nodes show it).
func codeColumns(fset *token.FileSet, f *ast.File) map[int]int {
	first := map[int]int{}
	mark := func(p token.Pos) {
		if !p.IsValid() {
			return
		}
		pos := fset.Position(p)
		if c, ok := first[pos.Line]; !ok || pos.Column < c {
			first[pos.Line] = pos.Column
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n.(type) {
		case nil, *ast.Comment, *ast.CommentGroup:
			return false
		}
		mark(n.Pos())
		mark(n.End() - 1)
		return true
	})
	return first
}

// silenced reports whether a directive silences a finding at p, and marks
// that directive used.
func (r *reporter) silenced(p token.Pos) bool {
	tf := r.pass.Fset.File(p)
	if tf == nil {
		return false
	}
	line := tf.Line(p)
	for _, ig := range r.ignores {
		if ig.file == tf && (ig.line == line || (ig.alone && ig.line+1 == line)) {
			ig.used = true
			return true
		}
	}
	return false
}

// reportf reports a diagnostic at rng unless a directive silences it.
func (r *reporter) reportf(rng analysis.Range, format string, args ...any) {
	if r.silenced(rng.Pos()) {
		return
	}
	r.pass.ReportRangef(rng, format, args...)
}

// reportUnused reports the directives that silenced nothing.
func (r *reporter) reportUnused() {
	for _, ig := range r.ignores {
		if !ig.used {
			r.pass.Reportf(ig.comment.Pos(), "this %s silences no leasecheck finding: remove it", IgnoreDirective)
		}
	}
}

// silencedEither reports whether a directive silences a finding reported
// at both a and b, marking every directive that does used.
func (r *reporter) silencedEither(a, b token.Pos) bool {
	sa, sb := r.silenced(a), r.silenced(b)
	return sa || sb
}
