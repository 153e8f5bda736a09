package evolve

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNotGit is returned when the spec is not inside a git work tree.
var ErrNotGit = errors.New("not in a git repository")

// ErrUnknownRef is returned when the base revision does not exist.
var ErrUnknownRef = errors.New("unknown revision")

// repo is a git work tree and a revision in it.
type repo struct {
	top string // the work tree's root, symlinks resolved
	ref string // as the user wrote it
	rev string // the commit it names
}

// git runs git in dir and returns its standard output.
func git(dir string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = stdin
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errs.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	return out.Bytes(), nil
}

// openRepo finds the git work tree holding dir and resolves ref in it.
func openRepo(dir, ref string) (*repo, error) {
	out, err := git(dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("%s: %w (check -base reads the spec at a git revision)", dir, ErrNotGit)
	}
	top, err := filepath.EvalSymlinks(strings.TrimSpace(string(out)))
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(ref, "-") {
		return nil, fmt.Errorf("%w %q", ErrUnknownRef, ref)
	}
	out, err = git(top, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("%w %q in %s (fetch it first; in CI a shallow clone may lack it)", ErrUnknownRef, ref, top)
	}
	return &repo{top: top, ref: ref, rev: strings.TrimSpace(string(out))}, nil
}

// rel returns path relative to the work tree's root, with slashes.
func (r *repo) rel(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(d, filepath.Base(abs))
	}
	rel, err := filepath.Rel(r.top, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("%s is outside the git work tree %s", path, r.top)
	}
	return filepath.ToSlash(rel), nil
}

// readFile returns the content of path (in the work tree) at the
// revision, or an error matching os.ErrNotExist.
func (r *repo) readFile(path string) ([]byte, error) {
	rel, err := r.rel(path)
	if err != nil {
		return nil, err
	}
	if _, err := git(r.top, nil, "cat-file", "-e", r.rev+":"+rel); err != nil {
		return nil, fmt.Errorf("%s at %s: %w", rel, r.ref, os.ErrNotExist)
	}
	return git(r.top, nil, "show", r.rev+":"+rel)
}

// extract writes the tree of dir (a directory of the work tree) at the
// revision into a new directory under tmp, and returns where dir is in it.
func (r *repo) extract(dir, tmp string) (string, error) {
	rel, err := r.rel(filepath.Join(dir, "x"))
	if err != nil {
		return "", err
	}
	rel = strings.TrimSuffix(strings.TrimSuffix(rel, "x"), "/")
	args := []string{"archive", "--format=tar", r.rev}
	if rel != "" {
		args = append(args, "--", rel)
	}
	data, err := git(r.top, nil, args...)
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		name := filepath.Join(tmp, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(tmp)+string(filepath.Separator)) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(name, b, 0o644)
				}
			}
		}
		if err != nil {
			return "", err
		}
	}
	return filepath.Join(tmp, filepath.FromSlash(rel)), nil
}
