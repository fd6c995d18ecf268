package release

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/mod/modfile"
)

// GoWork returns the contents go.work should have for the given sibling
// versions (see SiblingVersions): its own, with a replace directive of
// each module of the workspace, at each version the others require it at,
// to the module's directory. Without them, the go command reads the go.mod
// of those versions from the module proxy even though go.work uses the
// module's directory, and fails while they are not published.
func (ws *Workspace) GoWork(versions map[string][]string) (old, new []byte, err error) {
	workPath := filepath.Join(ws.Root, "go.work")
	old, err = os.ReadFile(workPath)
	if err != nil {
		return nil, nil, err
	}
	work, err := modfile.ParseWork(workPath, old, nil)
	if err != nil {
		return nil, nil, err
	}
	want := map[string]string{} // "path version" -> dir
	for _, m := range ws.Modules {
		dir := "./" + m.Dir
		if m.Dir == "." {
			dir = "./"
		}
		for _, v := range versions[m.Path] {
			want[m.Path+" "+v] = dir
		}
	}
	have := map[string]string{}
	for _, r := range work.Replace {
		if ws.isSibling(r.Old.Path) {
			have[r.Old.Path+" "+r.Old.Version] = r.New.Path
		}
	}
	if maps.Equal(want, have) {
		return old, old, nil
	}
	for _, r := range append([]*modfile.Replace(nil), work.Replace...) {
		if ws.isSibling(r.Old.Path) {
			if err := work.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return nil, nil, err
			}
		}
	}
	mods := append([]Module(nil), ws.Modules...)
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	for _, m := range mods {
		dir := "./" + m.Dir
		if m.Dir == "." {
			dir = "./"
		}
		for _, v := range versions[m.Path] {
			if err := work.AddReplace(m.Path, v, dir, ""); err != nil {
				return nil, nil, fmt.Errorf("go.work: %v", err)
			}
		}
	}
	work.Cleanup()
	return old, modfile.Format(work.Syntax), nil
}
