package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Check builds and vets every module on its own, outside the workspace,
// against the requirements of its go.mod, with the workspace's modules
// from the proxy g serves (see WriteProxy and NewGo). A module whose
// go.mod go mod tidy would change fails: its requirements are not what
// its code needs. Each module done is reported to progress.
func (ws *Workspace) Check(ctx context.Context, g *Go, scratch string, progress func(Module)) error {
	for _, m := range ws.Modules {
		dir, err := ws.copyModule(ctx, m, scratch)
		if err != nil {
			return err
		}
		if _, err := g.Run(ctx, dir, nil, "mod", "tidy"); err != nil {
			return err
		}
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return err
		}
		if !bytes.Equal(gomod, m.GoMod) {
			c := Change{Path: filepath.ToSlash(filepath.Join(m.Dir, "go.mod")), Old: m.GoMod, New: gomod}
			return fmt.Errorf("go mod tidy would change %s:\n%s", c.Path, c.Diff(scratch))
		}
		if _, err := g.Run(ctx, dir, nil, "build", "-o", os.DevNull, "./..."); err != nil {
			return err
		}
		if _, err := g.Run(ctx, dir, nil, "vet", "./..."); err != nil {
			return err
		}
		progress(m)
	}
	return nil
}

// Install runs go install pkg@version for each package, as a user would,
// from an empty directory outside any module, into bin; it returns the
// output of go version -m for each installed program, the module versions
// it was built from (the lines of the workspace's modules).
func (ws *Workspace) Install(ctx context.Context, g *Go, scratch, bin, version string, pkgs []string) (string, error) {
	dir := filepath.Join(scratch, "install")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var report strings.Builder
	for _, pkg := range pkgs {
		if _, err := g.Run(ctx, dir, []string{"GOBIN=" + bin}, "install", pkg+"@"+version); err != nil {
			return "", err
		}
		exe := filepath.Join(bin, filepath.Base(pkg))
		out, err := g.Run(ctx, dir, nil, "version", "-m", exe)
		if err != nil {
			return "", err
		}
		for _, line := range strings.Split(string(out), "\n") {
			// The program's path and the dlock modules it was built from.
			if f := strings.Fields(line); len(f) > 1 && (f[0] == "path" || ws.isSibling(f[1])) {
				report.WriteString(line + "\n")
			}
		}
	}
	return report.String(), nil
}
