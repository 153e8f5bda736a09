// Package leasecheck defines an analyzer for code that holds lockgen's
// locks and semaphores.
//
// # Analyzer leasecheck
//
// leasecheck: check that leases and permits are released, and that work
// done while holding one uses the lease's context
//
// A lease (*lockrt.Lease, *lockrt.MultiLease, *lockrt.RedLockLease) or a
// permit (*lockrt.Permit) that is obtained and then not released on every
// path keeps the lock for its whole lease, or, when the watchdog renews
// it, for as long as the process lives:
//
//	lease, err := locks.Order(id).Lock(ctx)
//	if err != nil {
//		return err
//	}
//	if done {
//		return nil // lease is never unlocked
//	}
//	defer lease.Unlock(ctx)
//
// As the lostcancel check does for cancel functions, leasecheck looks for
// a path from the statement that obtains the hold to a return statement
// on which the variable is not used: calling Unlock, Release or Downgrade
// on it, or any use other than a method call (passing it on, returning
// it, storing it, using it in a closure) counts as releasing it; calling
// Context, Token and other methods does not. Paths on which the call's
// error is not nil (if err != nil { ... }) or the variable is nil hold
// nothing and are not followed. Discarding the hold (_, err := l.Lock(ctx))
// is reported too.
//
// Work done while the hold lasts should use the lease's context: it is
// cancelled when the lock is lost, so the work stops before another
// holder starts. leasecheck reports a call that passes the context given
// to Lock (or Acquire, ...) after the hold was obtained and before it is
// released in the same block, unless the call is to the lockgen runtime
// itself (releases take the caller's context on purpose), deferred, or on
// the error path; assigning the lease's context to the variable
// (ctx = lease.Context()) ends the check for it.
//
// A release wrapped in another call (must(lease.Unlock(ctx)),
// err = errors.Join(err, lease.Unlock(ctx))) ends the hold as a release
// statement does; one in an if's branch, a closure or on the right of
// && or || may not run, and does not.
//
// Every package is checked, whether or not it imports the runtime: code
// written from the Quickstart holds leases through the generated package
// alone. Test files (_test.go) and the runtime's own packages are not
// checked: tests hold and drop leases on purpose.
//
// # Silencing a finding
//
// A finding that is deliberate is silenced by a //lockgen:ignore
// directive with a reason, at the end of the reported line or alone on
// the line before it (see IgnoreDirective):
//
//	//lockgen:ignore the audit record is written even if the lock is lost
//	err = audit(ctx, id)
//
// A directive without a reason, or one that silences nothing, is
// reported.
package leasecheck

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/ctrlflow"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/cfg"
)

// Analyzer is the leasecheck analyzer.
var Analyzer = &analysis.Analyzer{
	Name:     "leasecheck",
	Doc:      "check that lockgen leases and permits are released on every path, and that work inside a hold uses the lease's context",
	URL:      "https://pkg.go.dev/github.com/lockgen/lockgen/internal/leasecheck",
	Run:      run,
	Requires: []*analysis.Analyzer{inspect.Analyzer, ctrlflow.Analyzer},
}

// RuntimePath is the import path of lockgen's runtime.
const RuntimePath = "github.com/lockgen/lockgen/runtime"

// holdTypes are the runtime's types of a hold, and the method that
// releases each.
var holdTypes = map[string]string{
	"Lease":        "Unlock",
	"MultiLease":   "Unlock",
	"RedLockLease": "Unlock",
	"Permit":       "Release",
}

// releasing are the methods of a hold that end it (Downgrade hands it on
// to a new lease).
var releasing = map[string]bool{"Unlock": true, "Release": true, "Downgrade": true}

func run(pass *analysis.Pass) (any, error) {
	if inRuntimeTree(pass.Pkg.Path()) {
		return nil, nil // the runtime itself manages holds by other means
	}
	// Every other package is checked, whatever it imports: code written
	// from the Quickstart holds leases through the generated package
	// alone (locks.Order(id).Lock(ctx)) and need not import the runtime.
	var files []*ast.File
	for _, f := range pass.Files {
		if !strings.HasSuffix(pass.Fset.File(f.Pos()).Name(), "_test.go") {
			files = append(files, f) // tests hold and drop leases on purpose
		}
	}
	r := &reporter{pass: pass, ignores: collectIgnores(pass, files)}
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	ins.Preorder([]ast.Node{(*ast.FuncDecl)(nil), (*ast.FuncLit)(nil)}, func(n ast.Node) {
		if strings.HasSuffix(pass.Fset.File(n.Pos()).Name(), "_test.go") {
			return
		}
		runFunc(r, n)
	})
	r.reportUnused()
	return nil, nil
}

// inRuntimeTree reports whether path is the runtime or one of its
// packages (runtime/lockimpl, runtime/internal/...).
func inRuntimeTree(path string) bool {
	return path == RuntimePath || strings.HasPrefix(path, RuntimePath+"/")
}

// holdType returns the name of the runtime's hold type t points to, or "".
func holdType(t types.Type) string {
	ptr, ok := types.Unalias(t).(*types.Pointer)
	if !ok {
		return ""
	}
	named, ok := types.Unalias(ptr.Elem()).(*types.Named)
	if !ok || named.Obj().Pkg() == nil || named.Obj().Pkg().Path() != RuntimePath {
		return ""
	}
	if _, ok := holdTypes[named.Obj().Name()]; !ok {
		return ""
	}
	return named.Obj().Name()
}

// hold is one statement obtaining a hold.
type hold struct {
	stmt  ast.Node // the AssignStmt or ValueSpec
	call  *ast.CallExpr
	v     *types.Var // the hold's variable
	err   *types.Var // the error's variable, if any
	ctx   *types.Var // the context passed to the call, if a variable
	typ   string     // "Lease", "Permit", ...
	block []ast.Stmt // the statements of the enclosing block
	index int        // of the statement in block, -1 if not found
}

func runFunc(r *reporter, node ast.Node) {
	pass := r.pass
	var body *ast.BlockStmt
	var ftype *ast.FuncType
	switch n := node.(type) {
	case *ast.FuncDecl:
		body, ftype = n.Body, n.Type
	case *ast.FuncLit:
		body, ftype = n.Body, n.Type
	}
	if body == nil {
		return
	}
	funcScope := pass.TypesInfo.Scopes[ftype]
	var holds []*hold
	ast.PreorderStack(body, []ast.Node{node}, func(n ast.Node, stack []ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false // analysed on its own
		}
		call, ok := n.(*ast.CallExpr)
		if !ok || len(stack) == 0 {
			return true
		}
		tv, ok := pass.TypesInfo.Types[call]
		if !ok {
			return true
		}
		first := tv.Type
		if tuple, ok := tv.Type.(*types.Tuple); ok {
			if tuple.Len() == 0 {
				return true
			}
			first = tuple.At(0).Type()
		}
		typ := holdType(first)
		if typ == "" || !obtains(pass, call) {
			return true
		}
		h := &hold{call: call, typ: typ, index: -1}
		var lhs []ast.Expr
		switch parent := stack[len(stack)-1].(type) {
		case *ast.AssignStmt:
			if len(parent.Rhs) != 1 {
				return true
			}
			h.stmt, lhs = parent, parent.Lhs
		case *ast.ValueSpec:
			if len(parent.Values) != 1 {
				return true
			}
			h.stmt = parent
			for _, id := range parent.Names {
				lhs = append(lhs, id)
			}
		case *ast.ExprStmt:
			r.reportf(call, "the %s is discarded: it is never released and holds until its lease runs out", noun(typ))
			return true
		default:
			return true // used at once: passed on, returned, ...
		}
		id, ok := lhs[0].(*ast.Ident)
		if !ok {
			return true // stored in a field or an element: escapes
		}
		if id.Name == "_" {
			r.reportf(id, "the %s returned by %s is discarded: it is never released and holds until its lease runs out", noun(typ), callName(call))
			return true
		}
		h.v = variable(pass, id)
		if h.v == nil || !funcScope.Contains(h.v.Pos()) {
			return true // declared outside: assume it is released elsewhere
		}
		if len(lhs) > 1 {
			if eid, ok := lhs[1].(*ast.Ident); ok {
				h.err = variable(pass, eid)
			}
		}
		if len(call.Args) > 0 {
			if cid, ok := ast.Unparen(call.Args[0]).(*ast.Ident); ok {
				if v, ok := pass.TypesInfo.Uses[cid].(*types.Var); ok && isContext(v.Type()) {
					h.ctx = v
				}
			}
		}
		stmtNode := ast.Node(h.stmt)
		if _, ok := h.stmt.(*ast.ValueSpec); ok && len(stack) >= 3 {
			stmtNode = stack[len(stack)-3] // the DeclStmt
		}
		for i := len(stack) - 1; i >= 0; i-- {
			var list []ast.Stmt
			switch b := stack[i].(type) {
			case *ast.BlockStmt:
				list = b.List
			case *ast.CaseClause:
				list = b.Body
			case *ast.CommClause:
				list = b.Body
			default:
				continue
			}
			for j, s := range list {
				if s == stmtNode {
					h.block, h.index = list, j
				}
			}
			if h.block == nil && i+1 < len(stack) {
				// The statement is an if's or switch's init: the hold
				// lives in the enclosing statement.
				for j, s := range list {
					if s == stack[i+1] {
						h.block, h.index = list, j
					}
				}
			}
			break
		}
		holds = append(holds, h)
		return true
	})
	if len(holds) == 0 {
		return
	}
	cfgs := pass.ResultOf[ctrlflow.Analyzer].(*ctrlflow.CFGs)
	var g *cfg.CFG
	switch n := node.(type) {
	case *ast.FuncDecl:
		g = cfgs.FuncDecl(n)
	case *ast.FuncLit:
		g = cfgs.FuncLit(n)
	}
	for _, h := range holds {
		if g != nil {
			if ret := lostPath(pass, g, h); ret != nil && !r.silencedEither(h.stmt.Pos(), ret.Pos()) {
				line := pass.Fset.Position(h.stmt.Pos()).Line
				pass.ReportRangef(h.stmt, "%s is not released on all paths: call %s.%s on each, or defer it (a %s not released holds until it runs out)", h.v.Name(), h.v.Name(), holdTypes[h.typ], noun(h.typ))
				pos, end := ret.Pos(), ret.End()
				if pass.Fset.File(pos) != pass.Fset.File(end) {
					end = pos
				}
				pass.Report(analysis.Diagnostic{Pos: pos, End: end,
					Message: "this return statement may be reached without releasing " + h.v.Name() + ", obtained on line " + itoa(line)})
			}
		}
		outerContext(r, h)
	}
}

// obtains reports whether call makes a new hold, rather than returning
// one that exists (a method of a hold other than Downgrade, say).
func obtains(pass *analysis.Pass, call *ast.CallExpr) bool {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return true
	}
	if recv := pass.TypesInfo.Types[sel.X]; recv.Type != nil && holdType(recv.Type) != "" {
		return sel.Sel.Name == "Downgrade"
	}
	return true
}

func variable(pass *analysis.Pass, id *ast.Ident) *types.Var {
	if v, ok := pass.TypesInfo.Defs[id].(*types.Var); ok {
		return v
	}
	v, _ := pass.TypesInfo.Uses[id].(*types.Var)
	return v
}

func isContext(t types.Type) bool {
	named, ok := types.Unalias(t).(*types.Named)
	return ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == "context" && named.Obj().Name() == "Context"
}

func noun(typ string) string {
	if typ == "Permit" {
		return "permit"
	}
	return "lease"
}

func callName(call *ast.CallExpr) string {
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		return f.Sel.Name
	case *ast.Ident:
		return f.Name
	}
	return "the call"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// releases reports whether nodes contain a use of v that releases it:
// any use except as the receiver of a non-releasing method, or as an
// operand of a comparison with nil.
func releases(pass *analysis.Pass, v *types.Var, nodes []ast.Node) bool {
	found := false
	for _, n := range nodes {
		ast.PreorderStack(n, nil, func(n ast.Node, stack []ast.Node) bool {
			if found {
				return false
			}
			id, ok := n.(*ast.Ident)
			if !ok || pass.TypesInfo.Uses[id] != v {
				return true
			}
			if len(stack) > 0 {
				switch p := stack[len(stack)-1].(type) {
				case *ast.SelectorExpr:
					if p.X == id && !releasing[p.Sel.Name] {
						return true
					}
				case *ast.BinaryExpr:
					if p.Op == token.EQL || p.Op == token.NEQ {
						return true
					}
				}
			}
			found = true
			return false
		})
	}
	return found
}

// nilTest returns, for a condition comparing the hold's error with nil
// (or the hold with nil), which successor holds nothing: 0 for the true
// branch, 1 for the false branch, -1 for neither.
func nilTest(pass *analysis.Pass, h *hold, cond ast.Node, errLive bool) int {
	b, ok := cond.(*ast.BinaryExpr)
	if !ok || (b.Op != token.EQL && b.Op != token.NEQ) {
		return -1
	}
	x, y := ast.Unparen(b.X), ast.Unparen(b.Y)
	if isNil(pass, x) {
		x, y = y, x
	}
	id, ok := x.(*ast.Ident)
	if !ok || !isNil(pass, y) {
		return -1
	}
	switch v := pass.TypesInfo.Uses[id]; {
	case errLive && h.err != nil && v == h.err: // err != nil: the true branch holds nothing
		if b.Op == token.NEQ {
			return 0
		}
		return 1
	case v == h.v: // lease == nil: the true branch holds nothing
		if b.Op == token.EQL {
			return 0
		}
		return 1
	}
	return -1
}

func isNil(pass *analysis.Pass, e ast.Expr) bool {
	tv, ok := pass.TypesInfo.Types[e]
	return ok && tv.IsNil()
}

// lostPath finds a path through the CFG from the hold's statement to a
// return statement on which the hold is not released, and returns the
// return statement (maybe synthetic), or nil.
func lostPath(pass *analysis.Pass, g *cfg.CFG, h *hold) *ast.ReturnStmt {
	var def *cfg.Block
	var rest []ast.Node
outer:
	for _, b := range g.Blocks {
		for i, n := range b.Nodes {
			if n == h.stmt || (n.Pos() <= h.stmt.Pos() && h.stmt.End() <= n.End() && isDecl(n)) {
				def, rest = b, b.Nodes[i+1:]
				break outer
			}
		}
	}
	if def == nil || releases(pass, h.v, rest) {
		return nil
	}
	// succs returns the successors of b that may hold the lease: not the
	// branch where its error is not nil (while the error variable still
	// holds the error of the call), nor where it is nil.
	succs := func(b *cfg.Block, errLive bool) []*cfg.Block {
		if len(b.Succs) == 2 && len(b.Nodes) > 0 {
			switch nilTest(pass, h, b.Nodes[len(b.Nodes)-1], errLive) {
			case 0:
				return b.Succs[1:]
			case 1:
				return b.Succs[:1]
			}
		}
		return b.Succs
	}
	if ret := def.Return(); ret != nil {
		return ret
	}
	type state struct {
		b       *cfg.Block
		errLive bool
	}
	memo := map[*cfg.Block]bool{}
	seen := map[state]bool{}
	var search func([]*cfg.Block, bool) *ast.ReturnStmt
	search = func(blocks []*cfg.Block, errLive bool) *ast.ReturnStmt {
		for _, b := range blocks {
			if seen[state{b, errLive}] || !b.Live {
				continue
			}
			seen[state{b, errLive}] = true
			used, ok := memo[b]
			if !ok {
				used = releases(pass, h.v, b.Nodes)
				memo[b] = used
			}
			if used {
				continue
			}
			if ret := b.Return(); ret != nil {
				return ret
			}
			live := errLive && !assignsAny(pass, h.err, b.Nodes[:max(len(b.Nodes)-1, 0)])
			if ret := search(succs(b, live), live); ret != nil {
				return ret
			}
		}
		return nil
	}
	live := !assignsAny(pass, h.err, rest[:max(len(rest)-1, 0)])
	return search(succs(def, live), live)
}

// assignsAny reports whether nodes assign to v.
func assignsAny(pass *analysis.Pass, v *types.Var, nodes []ast.Node) bool {
	if v == nil {
		return false
	}
	found := false
	for _, n := range nodes {
		ast.Inspect(n, func(n ast.Node) bool {
			if a, ok := n.(*ast.AssignStmt); ok {
				for _, l := range a.Lhs {
					if id, ok := l.(*ast.Ident); ok && (pass.TypesInfo.Uses[id] == v || pass.TypesInfo.Defs[id] == v) {
						found = true
					}
				}
			}
			return !found
		})
	}
	return found
}

func isDecl(n ast.Node) bool { _, ok := n.(*ast.DeclStmt); return ok }

// outerContext reports calls that pass the context given to the call that
// obtained the hold while the hold lasts: from the statement after it to
// the end of its block, or to the first statement that releases the hold
// or assigns the context variable.
func outerContext(r *reporter, h *hold) {
	pass := r.pass
	if h.ctx == nil || h.index < 0 {
		return
	}
	for _, s := range h.block[h.index+1:] {
		if assigns(pass, h.ctx, s) {
			return
		}
		if ifs, ok := s.(*ast.IfStmt); ok && ifs.Init == nil && nilTest(pass, h, ifs.Cond, true) == 0 {
			continue // the error path holds nothing
		}
		if _, ok := s.(*ast.DeferStmt); ok {
			continue
		}
		if releasesHere(pass, h.v, s) {
			return
		}
		ast.Inspect(s, func(n ast.Node) bool {
			if _, ok := n.(*ast.DeferStmt); ok {
				return false
			}
			call, ok := n.(*ast.CallExpr)
			if !ok || inRuntime(pass, call) {
				return true
			}
			for _, arg := range call.Args {
				if id, ok := ast.Unparen(arg).(*ast.Ident); ok && pass.TypesInfo.Uses[id] == h.ctx {
					r.reportf(arg, "%s is the context %s was obtained with; work inside the hold should use %s.Context() (or a context derived from it), which is cancelled when the %s is lost",
						id.Name, h.v.Name(), h.v.Name(), noun(h.typ))
				}
			}
			return true
		})
	}
}

// assigns reports whether s assigns to v (ctx = lease.Context()).
func assigns(pass *analysis.Pass, v *types.Var, s ast.Stmt) bool {
	a, ok := s.(*ast.AssignStmt)
	if !ok {
		return false
	}
	for _, l := range a.Lhs {
		if id, ok := l.(*ast.Ident); ok && pass.TypesInfo.Uses[id] == v {
			return true
		}
	}
	return false
}

// releasesHere reports whether statement s always calls a method
// releasing v when it runs: v.Unlock(...) or v.Release(...) as the
// statement, as an operand or argument of its expressions
// (must(lease.Unlock(ctx)), err := lease.Unlock(ctx)), in an if's init or
// condition, or in a returned expression. Calls inside function literals,
// in the branches of an if, or on the right of && and || run maybe
// later, maybe never, and do not count.
func releasesHere(pass *analysis.Pass, v *types.Var, s ast.Stmt) bool {
	var exprs []ast.Expr
	switch s := s.(type) {
	case *ast.ExprStmt:
		exprs = []ast.Expr{s.X}
	case *ast.AssignStmt:
		exprs = s.Rhs
	case *ast.IfStmt:
		if s.Init != nil && releasesHere(pass, v, s.Init) {
			return true
		}
		exprs = []ast.Expr{s.Cond}
	case *ast.ReturnStmt:
		exprs = s.Results
	case *ast.DeclStmt:
		if g, ok := s.Decl.(*ast.GenDecl); ok {
			for _, spec := range g.Specs {
				if vs, ok := spec.(*ast.ValueSpec); ok {
					exprs = append(exprs, vs.Values...)
				}
			}
		}
	}
	for _, e := range exprs {
		if callsRelease(pass, v, e) {
			return true
		}
	}
	return false
}

// callsRelease reports whether evaluating e always calls a releasing
// method on v.
func callsRelease(pass *analysis.Pass, v *types.Var, e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				found = callsRelease(pass, v, n.X)
				return false
			}
		case *ast.CallExpr:
			if sel, ok := ast.Unparen(n.Fun).(*ast.SelectorExpr); ok && releasing[sel.Sel.Name] {
				if id, ok := ast.Unparen(sel.X).(*ast.Ident); ok && pass.TypesInfo.Uses[id] == v {
					found = true
					return false
				}
			}
		}
		return true
	})
	return found
}

// inRuntime reports whether call calls a function or method of lockgen's
// runtime.
func inRuntime(pass *analysis.Pass, call *ast.CallExpr) bool {
	var id *ast.Ident
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		id = f.Sel
	case *ast.Ident:
		id = f
	default:
		return false
	}
	obj := pass.TypesInfo.Uses[id]
	return obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == RuntimePath
}
