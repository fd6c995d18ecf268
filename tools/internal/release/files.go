package release

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// file is one file of a module: on disk, or in memory when its content
// is rewritten (go.mod, go.sum). It implements golang.org/x/mod/zip.File.
type file struct {
	rel  string // slash path inside the module
	disk string // path on disk, if data is nil
	data []byte
}

func (f file) Path() string { return f.rel }

func (f file) Lstat() (fs.FileInfo, error) {
	if f.data != nil {
		return memInfo{name: path.Base(f.rel), size: int64(len(f.data))}, nil
	}
	return os.Lstat(f.disk)
}

func (f file) Open() (io.ReadCloser, error) {
	if f.data != nil {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return os.Open(f.disk)
}

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

// files lists the files of module m as the next commit would hold them:
// the files git tracks or would track (not ignored), read from the working
// tree, without those of nested modules. go.mod is m.GoMod and go.sum is
// m.GoSum, whatever is on disk.
func (ws *Workspace) files(ctx context.Context, m Module) ([]file, error) {
	cmd := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", m.Dir)
	cmd.Dir = ws.Root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files %s: %v: %s", m.Dir, err, strings.TrimSpace(stderr.String()))
	}
	var nested []string
	for _, o := range ws.Modules {
		if o.Dir != m.Dir && within(o.Dir, m.Dir) {
			nested = append(nested, o.Dir)
		}
	}
	files := []file{{rel: "go.mod", data: m.GoMod}}
	if m.GoSum != nil {
		files = append(files, file{rel: "go.sum", data: m.GoSum})
	}
	seen := map[string]bool{}
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		rel := name
		if m.Dir != "." {
			rel = strings.TrimPrefix(name, m.Dir+"/")
		}
		if rel == "go.mod" || rel == "go.sum" || inAny(name, nested) {
			continue
		}
		disk := filepath.Join(ws.Root, filepath.FromSlash(name))
		info, err := os.Lstat(disk)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			continue // a module zip holds regular files only
		}
		files = append(files, file{rel: rel, disk: disk})
	}
	return files, nil
}

// within reports whether slash path p is dir or below it.
func within(p, dir string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

func inAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// copyTo writes files into dir.
func copyTo(dir string, files []file) error {
	for _, f := range files {
		dst := filepath.Join(dir, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		r, err := f.Open()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
