package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/module"
)

// Go runs go commands outside the workspace, with the modules of a
// workspace served by a local proxy.
type Go struct {
	// Env is the environment of every command.
	Env []string
	// Log, if not nil, receives each command line and its output.
	Log io.Writer
}

// DefaultModCache is the private module cache of the workspace at root:
// one per checkout, so that two checkouts never serve each other's trees.
func DefaultModCache(root string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(cache, "dlock-release", hex.EncodeToString(sum[:6]), "mod"), nil
}

// NewGo returns the go command environment for a workspace whose modules
// are served from proxyDir: GOWORK=off, GOPROXY=file://proxyDir, then the
// shared module cache as a proxy, then the usual GOPROXY; the private
// module cache modCache, from which the workspace's modules are removed
// first (they may be there from an earlier run with other contents); and
// GONOSUMDB for the workspace's modules.
func NewGo(ctx context.Context, ws *Workspace, proxyDir, modCache string) (*Go, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "-json", "GOPROXY", "GOMODCACHE", "GONOSUMDB", "GOFLAGS").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %v", err)
	}
	var env struct{ GOPROXY, GOMODCACHE, GONOSUMDB, GOFLAGS string }
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("go env: %v", err)
	}
	for _, m := range ws.Modules {
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			return nil, err
		}
		for _, d := range []string{
			filepath.Join(modCache, "cache", "download", filepath.FromSlash(escaped)),
			filepath.Join(modCache, filepath.FromSlash(escaped)+"@"),
		} {
			if err := removeAllPrefix(d); err != nil {
				return nil, err
			}
		}
	}
	proxies := []string{fileURL(proxyDir)}
	if env.GOMODCACHE != "" && env.GOMODCACHE != modCache {
		proxies = append(proxies, fileURL(filepath.Join(env.GOMODCACHE, "cache", "download")))
	}
	if env.GOPROXY != "" && env.GOPROXY != "off" {
		proxies = append(proxies, env.GOPROXY)
	}
	var paths []string
	for _, m := range ws.Modules {
		paths = append(paths, m.Path)
	}
	nosum := strings.Join(paths, ",")
	if env.GONOSUMDB != "" {
		nosum = env.GONOSUMDB + "," + nosum
	}
	// The workspace's modules are written into modCache again at each
	// run, under the same version and so the same directory, with new
	// contents; the go command's index of module-cache directories
	// (kept in GOCACHE, keyed by directory, since a module version never
	// changes) would otherwise describe the packages of an earlier run.
	godebug := "goindex=0"
	if v := os.Getenv("GODEBUG"); v != "" {
		godebug = v + "," + godebug
	}
	set := map[string]string{
		"GODEBUG":    godebug,
		"GOWORK":     "off",
		"GOPROXY":    strings.Join(proxies, ","),
		"GOMODCACHE": modCache,
		"GONOSUMDB":  nosum,
		"GOFLAGS":    strings.TrimSpace(env.GOFLAGS + " -modcacherw"),
	}
	var e []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			e = append(e, kv)
		}
	}
	for k, v := range set {
		e = append(e, k+"="+v)
	}
	return &Go{Env: e}, nil
}

// Run runs go with args in dir, with extra environment variables, and
// returns its combined output.
func (g *Go) Run(ctx context.Context, dir string, extra []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), g.Env...), extra...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if g.Log != nil {
		fmt.Fprintf(g.Log, "$ go %s\n%s", strings.Join(args, " "), out.Bytes())
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out.Bytes())
	}
	return out.Bytes(), nil
}

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// removeAllPrefix removes every entry of filepath.Dir(prefix) whose path
// starts with prefix (a module's directories "<path>@<version>" share the
// prefix "<path>@").
func removeAllPrefix(prefix string) error {
	dir := filepath.Dir(prefix)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if p == prefix || strings.HasPrefix(p, prefix) && strings.HasSuffix(prefix, "@") {
			if err := os.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}
