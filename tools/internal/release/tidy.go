package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Change is a file that go mod tidy would change.
type Change struct {
	// Path is the file's path relative to the workspace root.
	Path     string
	Old, New []byte
}

// Tidy runs go mod tidy on a copy of each module, outside the workspace,
// with the workspace's modules from the proxy at proxyDir (see WriteProxy),
// and returns the go.mod and go.sum files whose tidy contents differ from
// the module's, go.sum without lines for the workspace's modules.
func (ws *Workspace) Tidy(ctx context.Context, g *Go, scratch string) ([]Change, error) {
	var changes []Change
	for _, m := range ws.Modules {
		dir, err := ws.copyModule(ctx, m, scratch)
		if err != nil {
			return nil, err
		}
		if _, err := g.Run(ctx, dir, nil, "mod", "tidy"); err != nil {
			return nil, err
		}
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		gosum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if gosum != nil {
			gosum = ws.dropSiblingSums(gosum)
		}
		if !bytes.Equal(gomod, m.GoMod) {
			changes = append(changes, Change{Path: filepath.ToSlash(filepath.Join(m.Dir, "go.mod")), Old: m.GoMod, New: gomod})
		}
		if !bytes.Equal(gosum, m.GoSum) {
			changes = append(changes, Change{Path: filepath.ToSlash(filepath.Join(m.Dir, "go.sum")), Old: m.GoSum, New: gosum})
		}
	}
	return changes, nil
}

// copyModule writes module m's files (its go.sum without the workspace's
// lines) into a directory of scratch and returns that directory.
func (ws *Workspace) copyModule(ctx context.Context, m Module, scratch string) (string, error) {
	if m.GoSum != nil {
		m.GoSum = ws.dropSiblingSums(m.GoSum)
	}
	files, err := ws.files(ctx, m)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(scratch, "src", filepath.FromSlash(m.Dir))
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := copyTo(dir, files); err != nil {
		return "", err
	}
	return dir, nil
}

// Apply writes each change into the workspace.
func (ws *Workspace) Apply(changes []Change) error {
	for _, c := range changes {
		p := filepath.Join(ws.Root, filepath.FromSlash(c.Path))
		if c.New == nil {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return err
			}
			continue
		}
		if err := os.WriteFile(p, c.New, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Diff returns a unified diff of a change (from diff -u when there is
// one, else the new contents).
func (c Change) Diff(scratch string) string {
	dir, err := os.MkdirTemp(scratch, "diff")
	if err == nil {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		if os.WriteFile(a, c.Old, 0o644) == nil && os.WriteFile(b, c.New, 0o644) == nil {
			out, _ := exec.Command("diff", "-u", "--label", "a/"+c.Path, "--label", "b/"+c.Path, a, b).Output()
			if len(out) > 0 {
				return string(out)
			}
		}
	}
	return fmt.Sprintf("%s would be:\n%s", c.Path, c.New)
}
