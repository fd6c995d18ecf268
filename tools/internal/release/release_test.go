package release

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// writeTree writes files (slash paths relative to dir) into dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tinyRepo is a git repository holding a workspace of two modules, the
// root example.com/lib and example.com/lib/cmd (a command that imports
// it, nested in the root's tree), with the given go.mod of the second.
func tinyRepo(t *testing.T, cmdGoMod string) *Workspace {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"go.work":           "go 1.24.0\n\nuse (\n\t.\n\t./cmd\n)\n\nreplace example.com/lib v0.1.0 => ./\n",
		"go.mod":            "module example.com/lib\n\ngo 1.24.0\n",
		"lib.go":            "package lib\n\n// Answer is the answer.\nconst Answer = 42\n",
		".gitignore":        "ignored.txt\n",
		"ignored.txt":       "not in a module zip\n",
		"untracked.go":      "package lib\n",
		"cmd/go.mod":        cmdGoMod,
		"cmd/hello/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/lib\"\n)\n\nfunc main() { fmt.Println(lib.Answer) }\n",
	})
	for _, args := range [][]string{{"init", "-q"}, {"add", "go.work", "go.mod", "lib.go", ".gitignore", "cmd"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	ws, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

const cmdGoMod = "module example.com/lib/cmd\n\ngo 1.24.0\n\nrequire example.com/lib v0.1.0\n"

func TestFilesAreTheNextCommitsWithoutNestedModules(t *testing.T) {
	ws := tinyRepo(t, cmdGoMod)
	files, err := ws.files(context.Background(), ws.Modules[0])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path())
	}
	sort.Strings(got)
	if want := ".gitignore go.mod go.work lib.go untracked.go"; strings.Join(got, " ") != want {
		t.Errorf("files of the root module = %q, want %q (no ignored file, nothing of the nested module)", got, want)
	}
}

func TestSetVersionRewritesSiblingRequirementsOnly(t *testing.T) {
	ws := tinyRepo(t, cmdGoMod+"\nrequire golang.org/x/mod v0.32.0\n")
	at, err := ws.SetVersion("v0.3.0")
	if err != nil {
		t.Fatal(err)
	}
	gomod := string(at.Modules[1].GoMod)
	if !strings.Contains(gomod, "require example.com/lib v0.3.0\n") || !strings.Contains(gomod, "golang.org/x/mod v0.32.0") {
		t.Errorf("go.mod at v0.3.0:\n%s", gomod)
	}
	for _, bad := range []string{"v2.0.0", "1.0.0", "v1.0", "v1.0.0+meta", ""} {
		if _, err := ws.SetVersion(bad); err == nil {
			t.Errorf("SetVersion(%q) = nil error, want one", bad)
		}
	}
}

func TestReplacesFindsEveryReplaceDirective(t *testing.T) {
	ws := tinyRepo(t, cmdGoMod+"\nreplace example.com/lib => ../\n")
	found, err := ws.Replaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || !strings.Contains(found[0], "cmd/go.mod: replace example.com/lib => ../") {
		t.Errorf("Replaces() = %q", found)
	}
	if found, _ := tinyRepo(t, cmdGoMod).Replaces(); len(found) != 0 {
		t.Errorf("Replaces() without any = %q", found)
	}
}

func TestDropSiblingSums(t *testing.T) {
	ws := tinyRepo(t, cmdGoMod)
	in := "example.com/lib v0.1.0 h1:abc=\nexample.com/lib v0.1.0/go.mod h1:def=\nexample.com/library v1.0.0 h1:ghi=\n"
	if got, want := string(ws.dropSiblingSums([]byte(in))), "example.com/library v1.0.0 h1:ghi=\n"; got != want {
		t.Errorf("dropSiblingSums = %q, want %q", got, want)
	}
}

func TestGoWorkFollowsTheRequiredVersions(t *testing.T) {
	ws := tinyRepo(t, cmdGoMod)
	versions, err := ws.SiblingVersions()
	if err != nil {
		t.Fatal(err)
	}
	old, now, err := ws.GoWork(versions)
	if err != nil {
		t.Fatal(err)
	}
	if string(old) != string(now) {
		t.Errorf("go.work in step changed to:\n%s", now)
	}
	at, err := ws.SetVersion("v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	versions, _ = at.SiblingVersions()
	_, now, err = at.GoWork(versions)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(now), "example.com/lib v0.2.0 => ./") || strings.Contains(string(now), "v0.1.0") {
		t.Errorf("go.work for v0.2.0:\n%s", now)
	}
}

// TestInstallFromLocalProxy installs the command of the nested module at
// a version nothing has published, from the local proxy only, as a user's
// go install pkg@version would: it works without a replace directive and
// fails with one.
func TestInstallFromLocalProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	for _, tc := range []struct {
		name, gomod, wantErr string
	}{
		{"no replace", cmdGoMod, ""},
		{"replace", cmdGoMod + "\nreplace example.com/lib => ../\n", "replace directives"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ws := tinyRepo(t, tc.gomod)
			at, err := ws.SetVersion("v0.2.0")
			if err != nil {
				t.Fatal(err)
			}
			scratch := t.TempDir()
			proxy := filepath.Join(scratch, "proxy")
			if err := at.WriteProxy(ctx, proxy, at.AllAt("v0.2.0")); err != nil {
				t.Fatal(err)
			}
			g, err := NewGo(ctx, at, proxy, filepath.Join(scratch, "mod"))
			if err != nil {
				t.Fatal(err)
			}
			g.Env = append(g.Env, "GOPROXY="+fileURL(proxy)+",off", "GOFLAGS=-modcacherw", "GOTOOLCHAIN=local")
			if err := at.Check(ctx, g, scratch, func(Module) {}); err != nil {
				t.Fatalf("Check: %v", err)
			}
			report, err := at.Install(ctx, g, scratch, filepath.Join(scratch, "bin"), "v0.2.0", []string{"example.com/lib/cmd/hello"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Install = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"mod\texample.com/lib/cmd\tv0.2.0", "dep\texample.com/lib\tv0.2.0"} {
				if !strings.Contains(report, want) {
					t.Errorf("go version -m of hello lacks %q:\n%s", want, report)
				}
			}
			out, err := exec.Command(filepath.Join(scratch, "bin", "hello")).Output()
			if err != nil || string(out) != "42\n" {
				t.Errorf("hello = %q, %v; want 42", out, err)
			}
		})
	}
}

// A package added to a module since an earlier run is found by the next
// run over the same private module cache: the modules are written there
// again under the same version, and the go command's index of that
// directory, kept from the earlier run, must not be trusted.
func TestTidySeesPackagesAddedSinceTheLastRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	ctx := context.Background()
	ws := tinyRepo(t, cmdGoMod)
	modCache := filepath.Join(t.TempDir(), "mod")
	tidy := func(ws *Workspace) error {
		t.Helper()
		versions, err := ws.SiblingVersions()
		if err != nil {
			t.Fatal(err)
		}
		scratch := t.TempDir()
		proxy := filepath.Join(scratch, "proxy")
		if err := ws.WriteProxy(ctx, proxy, versions); err != nil {
			t.Fatal(err)
		}
		g, err := NewGo(ctx, ws, proxy, modCache)
		if err != nil {
			t.Fatal(err)
		}
		g.Env = append(g.Env, "GOPROXY="+fileURL(proxy)+",off", "GOTOOLCHAIN=local")
		_, err = ws.Tidy(ctx, g, scratch)
		return err
	}
	if err := tidy(ws); err != nil {
		t.Fatalf("first run: %v", err)
	}
	writeTree(t, ws.Root, map[string]string{
		"extra/extra.go":    "package extra\n\n// Answer is the answer.\nconst Answer = 42\n",
		"cmd/hello/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/lib/extra\"\n)\n\nfunc main() { fmt.Println(extra.Answer) }\n",
	})
	if out, err := exec.Command("git", "-C", ws.Root, "add", "extra", "cmd").CombinedOutput(); err != nil {
		t.Fatalf("git add: %v\n%s", err, out)
	}
	again, err := Load(ws.Root)
	if err != nil {
		t.Fatal(err)
	}
	if err := tidy(again); err != nil {
		t.Fatalf("second run, with a package added to example.com/lib: %v", err)
	}
}
