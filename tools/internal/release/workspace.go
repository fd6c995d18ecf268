package release

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// Module is one module of the workspace.
type Module struct {
	// Dir is the module's directory relative to the workspace root, in
	// slash form ("." for the root module).
	Dir string
	// Path is the module path.
	Path string
	// GoMod is the content of its go.mod file.
	GoMod []byte
	// GoSum is the content of its go.sum file (nil if it has none).
	GoSum []byte
}

// Workspace is the set of modules go.work names.
type Workspace struct {
	// Root is the absolute directory holding go.work.
	Root    string
	Modules []Module
}

// Load reads go.work in root and the go.mod and go.sum of each module it
// uses.
func Load(root string) (*Workspace, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	workPath := filepath.Join(abs, "go.work")
	data, err := os.ReadFile(workPath)
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork(workPath, data, nil)
	if err != nil {
		return nil, err
	}
	ws := &Workspace{Root: abs}
	for _, u := range work.Use {
		dir := filepath.ToSlash(filepath.Clean(u.Path))
		gomodPath := filepath.Join(abs, filepath.FromSlash(dir), "go.mod")
		gomod, err := os.ReadFile(gomodPath)
		if err != nil {
			return nil, err
		}
		f, err := modfile.ParseLax(gomodPath, gomod, nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s: no module directive", gomodPath)
		}
		gosum, err := os.ReadFile(filepath.Join(abs, filepath.FromSlash(dir), "go.sum"))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		ws.Modules = append(ws.Modules, Module{Dir: dir, Path: f.Module.Mod.Path, GoMod: gomod, GoSum: gosum})
	}
	return ws, nil
}

// isSibling reports whether path is the path of a module of the workspace.
func (ws *Workspace) isSibling(path string) bool {
	for _, m := range ws.Modules {
		if m.Path == path {
			return true
		}
	}
	return false
}

// Replaces lists the modules whose go.mod has a replace directive, as
// "dir/go.mod: replace old => new" lines.
func (ws *Workspace) Replaces() ([]string, error) {
	var found []string
	for _, m := range ws.Modules {
		f, err := modfile.Parse(m.Dir+"/go.mod", m.GoMod, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Replace {
			found = append(found, fmt.Sprintf("%s/go.mod: replace %s => %s", m.Dir, r.Old.Path, r.New.Path))
		}
	}
	return found, nil
}

// SiblingVersions returns, for each module of the workspace, the versions
// at which the other modules require it, sorted. It fails on a
// requirement that is not a canonical semantic version.
func (ws *Workspace) SiblingVersions() (map[string][]string, error) {
	seen := map[string]map[string]bool{}
	for _, m := range ws.Modules {
		f, err := modfile.ParseLax(m.Dir+"/go.mod", m.GoMod, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			if !ws.isSibling(r.Mod.Path) {
				continue
			}
			if semver.Canonical(r.Mod.Version) != r.Mod.Version {
				return nil, fmt.Errorf("%s/go.mod: require %s %s: not a canonical semantic version", m.Dir, r.Mod.Path, r.Mod.Version)
			}
			if seen[r.Mod.Path] == nil {
				seen[r.Mod.Path] = map[string]bool{}
			}
			seen[r.Mod.Path][r.Mod.Version] = true
		}
	}
	out := map[string][]string{}
	for p, vs := range seen {
		for v := range vs {
			out[p] = append(out[p], v)
		}
		sort.Slice(out[p], func(i, j int) bool { return semver.Compare(out[p][i], out[p][j]) < 0 })
	}
	return out, nil
}

// SetVersion returns a copy of the workspace in which every module's
// requirement on a sibling is version. Only the go.mod contents change;
// nothing is written.
func (ws *Workspace) SetVersion(version string) (*Workspace, error) {
	if semver.Canonical(version) != version || semver.Build(version) != "" {
		return nil, fmt.Errorf("version %q: want a canonical semantic version such as v1.2.3", version)
	}
	if major := semver.Major(version); major != "v0" && major != "v1" {
		return nil, fmt.Errorf("version %q: major version %s needs a /%s suffix on every module path", version, major, major)
	}
	out := &Workspace{Root: ws.Root}
	for _, m := range ws.Modules {
		f, err := modfile.Parse(m.Dir+"/go.mod", m.GoMod, nil)
		if err != nil {
			return nil, err
		}
		var siblings []string
		for _, r := range f.Require {
			if ws.isSibling(r.Mod.Path) {
				siblings = append(siblings, r.Mod.Path)
			}
		}
		for _, p := range siblings {
			if err := f.AddRequire(p, version); err != nil {
				return nil, err
			}
		}
		f.Cleanup()
		gomod, err := f.Format()
		if err != nil {
			return nil, err
		}
		m.GoMod = gomod
		out.Modules = append(out.Modules, m)
	}
	return out, nil
}

// dropSiblingSums returns gosum without the lines of the workspace's
// modules.
func (ws *Workspace) dropSiblingSums(gosum []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(gosum, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) > 0 && ws.isSibling(string(fields[0])) {
			continue
		}
		out.Write(line)
	}
	return out.Bytes()
}

// AllAt returns a version map (see WriteProxy) that serves every module
// of the workspace at version.
func (ws *Workspace) AllAt(version string) map[string][]string {
	out := map[string][]string{}
	for _, m := range ws.Modules {
		out[m.Path] = []string{version}
	}
	return out
}

// WriteGoMods writes each module's go.mod into the workspace.
func (ws *Workspace) WriteGoMods() error {
	for _, m := range ws.Modules {
		if err := os.WriteFile(filepath.Join(ws.Root, filepath.FromSlash(m.Dir), "go.mod"), m.GoMod, 0o644); err != nil {
			return err
		}
	}
	return nil
}
