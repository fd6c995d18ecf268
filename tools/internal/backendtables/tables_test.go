package backendtables

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/consul"
	_ "github.com/dlock-go/dlock/backend/etcd"
	_ "github.com/dlock-go/dlock/backend/file"
	_ "github.com/dlock-go/dlock/backend/memory"
	_ "github.com/dlock-go/dlock/backend/postgres"
	_ "github.com/dlock-go/dlock/backend/redis"
	_ "github.com/dlock-go/dlock/backend/redis/rediscluster"
	_ "github.com/dlock-go/dlock/backend/redis/redissentinel"
	_ "github.com/dlock-go/dlock/backend/redlock"
	_ "github.com/dlock-go/dlock/backend/zookeeper"
	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/topology"
)

// modulePath is the import path of the repository's root module.
const modulePath = "github.com/dlock-go/dlock"

// root is the repository's root directory, from this package's.
var root = filepath.Join("..", "..", "..")

// inProcess is the package of the one backend with neither a server nor a
// process to fault: it has no topology and no cell in the fault matrix.
const inProcess = "backend/memory"

// truth is what the tables are held to.
type truth struct {
	schemes  []string            // dlock.Schemes(), every backend imported
	packages map[string][]string // Open's table: package -> its schemes
	topos    []topology.Topology
}

func load(t *testing.T) truth {
	t.Helper()
	tr := truth{schemes: dlock.Schemes(), packages: map[string][]string{}, topos: topology.All()}
	table := mapLiteral(t, filepath.Join(root, "open.go"), "schemePackages")
	for scheme, pkg := range table {
		tr.packages[pkg] = append(tr.packages[pkg], scheme)
	}
	for _, ss := range tr.packages {
		sort.Strings(ss)
	}
	return tr
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestRegisteringPackages: every package under backend/ that registers a
// scheme is in Open's table, this test imports it (its schemes are in
// dlock.Schemes()), and Open's table names exactly the registered schemes.
func TestRegisteringPackages(t *testing.T) {
	tr := load(t)
	table := mapLiteral(t, filepath.Join(root, "open.go"), "schemePackages")
	registered := map[string]bool{}
	for _, s := range tr.schemes {
		registered[s] = true
		if _, ok := table[s]; !ok {
			t.Errorf("open.go: schemePackages lacks the registered scheme %q", s)
		}
	}
	for _, s := range sortedKeys(table) {
		if !registered[s] {
			t.Errorf("open.go: schemePackages has %q, which no imported backend registers (import its package in this test)", s)
		}
	}
	for _, pkg := range registeringPackages(t) {
		if _, ok := tr.packages[pkg]; !ok {
			t.Errorf("%s calls dlock.Register but is not in open.go's schemePackages", pkg)
		}
	}
	for _, pkg := range sortedKeys(tr.packages) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(pkg))); err != nil {
			t.Errorf("open.go: schemePackages names %s, which does not exist", pkg)
		}
	}
}

// registeringPackages lists the directories under backend/ with a
// non-test Go file that calls dlock.Register.
func registeringPackages(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "backend"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), "dlock.Register(") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sortedKeys(seen)
}

// TestLockctl: lockctl imports every backend package, and its help text
// knows every scheme (on a line of its own or under another's).
func TestLockctl(t *testing.T) {
	tr := load(t)
	imported := map[string]bool{}
	for _, dir := range []string{filepath.Join(root, "tools", "cmd", "lockctl"), filepath.Join(root, "tools", "internal", "lockctl")} {
		for path := range importsIn(t, dir) {
			imported[path] = true
		}
	}
	for _, pkg := range sortedKeys(tr.packages) {
		if !imported[modulePath+"/"+pkg] {
			t.Errorf("lockctl does not import %s (add it to tools/cmd/lockctl/backends.go)", pkg)
		}
	}
	lockctl := filepath.Join(root, "tools", "internal", "lockctl", "backend.go")
	known := map[string]bool{}
	for _, s := range firstStrings(t, lockctl, "known") {
		known[s] = true
	}
	for _, s := range firstStrings(t, lockctl, "variants") {
		known[s] = true
	}
	for _, s := range tr.schemes {
		if !known[s] {
			t.Errorf("tools/internal/lockctl/backend.go: scheme %q is in neither known nor variants", s)
		}
	}
}

// TestTopologies: every backend with a server has a topology, every
// topology's scheme is registered, and every kind the topologies run has
// an entry in the launcher's kind table.
func TestTopologies(t *testing.T) {
	tr := load(t)
	registered := map[string]bool{}
	for _, s := range tr.schemes {
		registered[s] = true
	}
	covered := map[string]bool{}
	for _, tp := range tr.topos {
		if !registered[tp.Scheme] {
			t.Errorf("topology %s: scheme %q is not registered by any backend", tp.Name, tp.Scheme)
		}
		for pkg, ss := range tr.packages {
			if slices.Contains(ss, tp.Scheme) {
				covered[pkg] = true
			}
		}
	}
	for _, pkg := range serverPackages(tr) {
		if !covered[pkg] {
			t.Errorf("%s (schemes %v) has no topology in internal/topology (All)", pkg, tr.packages[pkg])
		}
	}
	kinds := launcher.Kinds()
	for _, tp := range tr.topos {
		if !slices.Contains(kinds, tp.Kind) {
			t.Errorf("topology %s: the launcher has no entry for kind %q (internal/launcher/kinds.go)", tp.Name, tp.Kind)
		}
	}
}

// serverPackages are the backend packages that need a server: all but the
// in-process one and those whose schemes no topology serves and which
// need none (file).
func serverPackages(tr truth) []string {
	var out []string
	for _, pkg := range sortedKeys(tr.packages) {
		if pkg != inProcess && pkg != "backend/file" {
			out = append(out, pkg)
		}
	}
	return out
}

// TestCompose: every topology has its compose file, included by
// compose.yaml. (internal/topology's own test checks their contents.)
func TestCompose(t *testing.T) {
	tr := load(t)
	all := readFile(t, filepath.Join(root, "compose", "compose.yaml"))
	for _, tp := range tr.topos {
		name := topology.ComposeFile(tp)
		if _, err := os.Stat(filepath.Join(root, "compose", name)); err != nil {
			t.Errorf("topology %s has no compose/%s (run `go run ./tools/cmd/dlockenv compose`)", tp.Name, name)
		}
		if !strings.Contains(all, "\n  - "+name+"\n") {
			t.Errorf("compose/compose.yaml does not include %s", name)
		}
	}
}

// TestFaultMatrix: every topology, and every backend with neither a
// topology nor an in-process store (file), has a backend in the fault
// matrix, or is named as run only by the failover cells.
func TestFaultMatrix(t *testing.T) {
	tr := load(t)
	src := filepath.Join(root, "tools", "faults", "faults_test.go")
	have := map[string]bool{}
	for _, k := range firstStrings(t, src, "faultBackends") {
		have[k] = true
	}
	for _, k := range firstStrings(t, src, "failoverOnly") {
		have[k] = true
	}
	for _, tp := range tr.topos {
		if !have[tp.Name] {
			t.Errorf("tools/faults/faults_test.go: topology %s is in neither faultBackends nor failoverOnly", tp.Name)
		}
	}
	if !have["file"] {
		t.Errorf("tools/faults/faults_test.go: faultBackends lacks file")
	}
}

// TestInstallDeps: scripts/install-deps.sh installs the server program of
// every topology.
func TestInstallDeps(t *testing.T) {
	tr := load(t)
	script := readFile(t, filepath.Join(root, "scripts", "install-deps.sh"))
	for _, tp := range tr.topos {
		prog := tp.Server(tp.Nodes[0], topology.Options{DataDir: "/data"}).Program
		if !strings.Contains(script, prog) {
			t.Errorf("scripts/install-deps.sh does not mention %s, the server of topology %s", prog, tp.Name)
		}
	}
}

// TestGoWork: every backend package that is a module of its own is in
// go.work's use list and its replace list, and in the Makefile's MODULES.
func TestGoWork(t *testing.T) {
	tr := load(t)
	work := readFile(t, filepath.Join(root, "go.work"))
	var modules []string
	for _, line := range strings.Split(readFile(t, filepath.Join(root, "Makefile")), "\n") {
		if rest, ok := strings.CutPrefix(line, "MODULES"); ok {
			_, list, _ := strings.Cut(rest, "=")
			modules = strings.Fields(list)
		}
	}
	for _, pkg := range sortedKeys(tr.packages) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(pkg), "go.mod")); err != nil {
			continue
		}
		if !regexp.MustCompile(`(?m)^\s+\./` + regexp.QuoteMeta(pkg) + `$`).MatchString(work) {
			t.Errorf("go.work does not use ./%s", pkg)
		}
		if !strings.Contains(work, modulePath+"/"+pkg+" ") {
			t.Errorf("go.work does not replace %s/%s", modulePath, pkg)
		}
		if !slices.Contains(modules, pkg) {
			t.Errorf("the Makefile's MODULES lacks %s", pkg)
		}
	}
}

// TestDocs: the backend tables of README.md and docs/backends.md have a
// row for every backend package (its package path in README, one of its
// URL schemes in both), docs/election.md's cost table a line for every
// backend, docs/rwmutex.md's order table a row naming every backend, and
// CONTRIBUTING.md's topology table every topology.
func TestDocs(t *testing.T) {
	tr := load(t)
	readme := readFile(t, filepath.Join(root, "README.md"))
	backends := readFile(t, filepath.Join(root, "docs", "backends.md"))
	election := readFile(t, filepath.Join(root, "docs", "election.md"))
	if i := strings.Index(election, "## Cost per backend"); i >= 0 {
		election = election[i:]
		if j := strings.Index(election[1:], "\n## "); j >= 0 {
			election = election[:j+1]
		}
	} else {
		t.Error(`docs/election.md has no "## Cost per backend" section`)
	}
	rw := section(t, "docs/rwmutex.md", readFile(t, filepath.Join(root, "docs", "rwmutex.md")), "## Order per backend")
	contributing := readFile(t, filepath.Join(root, "CONTRIBUTING.md"))
	for _, pkg := range sortedKeys(tr.packages) {
		if !strings.Contains(readme, "`"+pkg+"`") {
			t.Errorf("README.md's backend table does not name `%s`", pkg)
		}
		if !mentionsScheme(readme, tr.packages[pkg]) {
			t.Errorf("README.md's backend table has none of %v", tr.packages[pkg])
		}
		if !mentionsScheme(backends, tr.packages[pkg]) {
			t.Errorf("docs/backends.md's backend table has none of %v", tr.packages[pkg])
		}
		// The cost table has a line per backend family: backend/redis
		// stands for its Cluster and Sentinel packages too.
		family := strings.Split(pkg, "/")[1]
		if !regexp.MustCompile(`(?m)^\t` + regexp.QuoteMeta(family) + `\s`).MatchString(election) {
			t.Errorf("docs/election.md's cost per backend has no line for %s", family)
		}
		if !regexp.MustCompile(`(?m)^\| [^|]*\b` + regexp.QuoteMeta(family) + `\b`).MatchString(rw) {
			t.Errorf("docs/rwmutex.md's order per backend has no row for %s", family)
		}
	}
	for _, tp := range tr.topos {
		if !strings.Contains(contributing, "| `"+tp.Name+"` |") {
			t.Errorf("CONTRIBUTING.md's topology table has no row for %s", tp.Name)
		}
	}
}

// section returns the part of doc from the heading to the next "## "
// heading; it fails t when doc has no such heading.
func section(t *testing.T, name, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, heading+"\n")
	if i < 0 {
		t.Errorf("%s has no %q section", name, heading)
		return ""
	}
	doc = doc[i:]
	if j := strings.Index(doc[1:], "\n## "); j >= 0 {
		doc = doc[:j+1]
	}
	return doc
}

// mentionsScheme reports whether doc shows one of schemes as a URL in a
// table row (`scheme://...`).
func mentionsScheme(doc string, schemes []string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, s := range schemes {
			if strings.Contains(line, "`"+s+"://") {
				return true
			}
		}
	}
	return false
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// importsIn returns the import paths of the non-test Go files in dir.
func importsIn(t *testing.T, dir string) map[string]bool {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				out[path] = true
			}
		}
	}
	return out
}

// compositeOf finds the composite literal assigned to the package-level
// variable name in the Go file path.
func compositeOf(t *testing.T, path, name string) *ast.CompositeLit {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if id.Name == name && i < len(vs.Values) {
					if cl, ok := vs.Values[i].(*ast.CompositeLit); ok {
						return cl
					}
				}
			}
		}
	}
	t.Fatalf("%s: no variable %s set to a composite literal (the test reads that table)", path, name)
	return nil
}

// mapLiteral returns the string-to-string map literal of variable name.
func mapLiteral(t *testing.T, path, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range compositeOf(t, path, name).Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			t.Fatalf("%s: %s is not a map literal", path, name)
		}
		out[stringLit(t, path, kv.Key)] = stringLit(t, path, kv.Value)
	}
	return out
}

// firstStrings returns, for each element of variable name's composite
// literal, its first string: a map's key, a slice element, or a struct
// element's first field.
func firstStrings(t *testing.T, path, name string) []string {
	t.Helper()
	var out []string
	for _, e := range compositeOf(t, path, name).Elts {
		switch e := e.(type) {
		case *ast.KeyValueExpr:
			out = append(out, stringLit(t, path, e.Key))
		case *ast.CompositeLit:
			if len(e.Elts) == 0 {
				t.Fatalf("%s: an empty element in %s", path, name)
			}
			out = append(out, stringLit(t, path, e.Elts[0]))
		default:
			out = append(out, stringLit(t, path, e))
		}
	}
	return out
}

func stringLit(t *testing.T, path string, e ast.Expr) string {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		t.Fatalf("%s: %T where the test expects a string literal", path, e)
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
