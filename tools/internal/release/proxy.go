package release

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// WriteProxy writes into dir a module proxy (the layout GOPROXY=file://dir
// reads) that serves each module of the workspace, built from the working
// tree, at the versions given for its path.
func (ws *Workspace) WriteProxy(ctx context.Context, dir string, versions map[string][]string) error {
	now := time.Now().UTC().Truncate(time.Second)
	for _, m := range ws.Modules {
		vs := versions[m.Path]
		if len(vs) == 0 {
			continue
		}
		files, err := ws.files(ctx, m)
		if err != nil {
			return err
		}
		zfiles := make([]modzip.File, len(files))
		for i, f := range files {
			zfiles[i] = f
		}
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		at := filepath.Join(dir, filepath.FromSlash(escaped), "@v")
		if err := os.MkdirAll(at, 0o755); err != nil {
			return err
		}
		for _, v := range vs {
			if err := writeVersion(at, module.Version{Path: m.Path, Version: v}, m.GoMod, zfiles, now); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(at, "list"), []byte(strings.Join(vs, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeVersion writes the .info, .mod and .zip files of mv into at.
func writeVersion(at string, mv module.Version, gomod []byte, files []modzip.File, t time.Time) error {
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{mv.Version, t})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, mv.Version+".info"), info, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, mv.Version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	z, err := os.Create(filepath.Join(at, mv.Version+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.Create(z, mv, files); err != nil {
		z.Close()
		return err
	}
	return z.Close()
}
