package evolve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockgen/lockgen/internal/gotypes"
	"github.com/lockgen/lockgen/internal/spec"
)

// Result is what Check found.
type Result struct {
	Findings []Finding
	// RepoFile is the spec's path relative to the git work tree's root,
	// with slashes: where CI annotations point.
	RepoFile string
	// NewAtBase is true when the spec did not exist at the base: every
	// object is new and nothing was compared.
	NewAtBase bool
}

// Check compares the spec cur, read from path, with the same file at the
// git revision ref of the work tree holding it. It returns ErrNotGit or
// ErrUnknownRef (wrapped) when there is nothing to compare against, and
// the old spec's Diagnostics when it does not parse.
//
// Payload types are compared by their encoded fields: the old type is
// loaded from the module's tree at ref (extracted into a temporary
// directory), the new one from the working tree. When the old tree does
// not load (say, its dependencies are not in the module cache), the types
// are compared by name only.
func Check(path string, cur *spec.Spec, ref string) (Result, error) {
	dir := filepath.Dir(path)
	r, err := openRepo(dir, ref)
	if err != nil {
		return Result{}, err
	}
	var res Result
	if res.RepoFile, err = r.rel(path); err != nil {
		return Result{}, err
	}
	data, err := r.readFile(path)
	if errors.Is(err, os.ErrNotExist) {
		res.NewAtBase = true
		return res, nil
	}
	if err != nil {
		return Result{}, err
	}
	old, err := spec.Parse(path, data)
	if err != nil {
		return Result{}, fmt.Errorf("the spec at %s: %w", ref, err)
	}
	payloads := Payloads{Cur: map[string]gotypes.Shape{}, Old: map[string]gotypes.Shape{}}
	if named(old) || named(cur) {
		if payloads.Cur, err = shapes(dir, cur); err != nil {
			return Result{}, err
		}
		tmp, err := os.MkdirTemp("", "lockgen-base-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(tmp)
		if oldDir, err := r.extractModule(dir, tmp); err == nil {
			payloads.Old, _ = shapes(oldDir, old) // on failure, compare names
		}
	} else {
		payloads.Cur, _ = shapes("", cur)
		payloads.Old, _ = shapes("", old)
	}
	res.Findings = Compare(old, cur, ref, payloads)
	return res, nil
}

// named reports whether a queue of s has a payload type from a package.
func named(s *spec.Spec) bool {
	for _, q := range s.Queues {
		if q.Payload.ImportPath != "" {
			return true
		}
	}
	return false
}

// shapes returns the shapes of the payload types of s, loading named
// ones from dir; predeclared types are their own shape.
func shapes(dir string, s *spec.Spec) (map[string]gotypes.Shape, error) {
	out := map[string]gotypes.Shape{}
	var ts []gotypes.Type
	for _, q := range s.Queues {
		if q.Payload.ImportPath == "" {
			out[q.Payload.String()] = gotypes.Shape{Type: q.Payload.String(), Under: q.Payload.TypeName}
			continue
		}
		ts = append(ts, gotypes.Type{ImportPath: q.Payload.ImportPath, Name: q.Payload.TypeName})
	}
	if len(ts) == 0 {
		return out, nil
	}
	found, _, err := gotypes.Shapes(dir, ts)
	if err != nil {
		return out, err
	}
	for t, sh := range found {
		out[t.String()] = sh
	}
	return out, nil
}

// extractModule extracts the module holding dir at the revision into tmp
// and returns where dir is in the copy.
func (r *repo) extractModule(dir, tmp string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	root := abs
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("%s is not in a Go module", dir)
		}
		root = parent
	}
	copyRoot, err := r.extract(root, tmp)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return "", err
	}
	return filepath.Join(copyRoot, rel), nil
}
