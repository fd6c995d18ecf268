// Command release checks dlock's modules as their users see them: each
// module on its own, with no replace directive and no go.work, taking the
// other modules of the repository at the versions its go.mod requires,
// served from a local module proxy built from the working tree (see
// package tools/internal/release).
//
//	release tidy [-check]             go mod tidy in every module (-check: fail if one is not tidy)
//	release check -version vX.Y.Z     require every sibling at vX.Y.Z, then build, vet and go install
//	              [-write]            lockctl outside the workspace; -write keeps the new go.mod files
//	                                  and go.work
//	release proxy -version vX.Y.Z DIR write the proxy of every module at vX.Y.Z into DIR
//	release replaces                  fail if a go.mod has a replace directive
//
// Run it from the repository root (the directory of go.work), e.g.
// `go run ./tools/cmd/release check -version v0.2.0`. The module cache of
// the go commands it runs is private to the checkout (-modcache).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/dlock-go/dlock/tools/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  release tidy [-check] [-v]
  release check -version vX.Y.Z [-write] [-install pkg,...] [-v]
  release proxy -version vX.Y.Z DIR
  release replaces`

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("release "+args[0], flag.ContinueOnError)
	root := fs.String("root", ".", "the directory of go.work")
	modCache := fs.String("modcache", "", "the private module cache (default: one per checkout in the user cache directory)")
	verbose := fs.Bool("v", false, "print every go command and its output")
	check := fs.Bool("check", false, "tidy: fail if a module is not tidy, change nothing")
	version := fs.String("version", "", "check, proxy: the version every module requires its siblings at")
	write := fs.Bool("write", false, "check: write the go.mod files that require vX.Y.Z")
	install := fs.String("install", "github.com/dlock-go/dlock/tools/cmd/lockctl", "check: the commands to go install at vX.Y.Z, comma-separated")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ws, err := release.Load(*root)
	if err != nil {
		return err
	}
	switch args[0] {
	case "replaces":
		found, err := ws.Replaces()
		if err != nil {
			return err
		}
		if len(found) > 0 {
			return fmt.Errorf("replace directives (the go command refuses them in go install pkg@version; go.work serves the checkout in development):\n  %s", strings.Join(found, "\n  "))
		}
		fmt.Println("replaces: no go.mod has a replace directive")
		return nil
	case "proxy":
		if *version == "" || fs.NArg() != 1 {
			return errors.New(usage)
		}
		ws, err := ws.SetVersion(*version)
		if err != nil {
			return err
		}
		return ws.WriteProxy(ctx, fs.Arg(0), ws.AllAt(*version))
	case "tidy", "check":
	default:
		return errors.New(usage)
	}

	scratch, err := os.MkdirTemp("", "dlock-release")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if *modCache == "" {
		if *modCache, err = release.DefaultModCache(ws.Root); err != nil {
			return err
		}
	}
	proxyDir := filepath.Join(scratch, "proxy")

	if args[0] == "tidy" {
		versions, err := ws.SiblingVersions()
		if err != nil {
			return err
		}
		if err := ws.WriteProxy(ctx, proxyDir, versions); err != nil {
			return err
		}
		g, err := newGo(ctx, ws, proxyDir, *modCache, *verbose)
		if err != nil {
			return err
		}
		changes, err := ws.Tidy(ctx, g, scratch)
		if err != nil {
			return err
		}
		oldWork, newWork, err := ws.GoWork(versions)
		if err != nil {
			return err
		}
		if !bytes.Equal(oldWork, newWork) {
			changes = append(changes, release.Change{Path: "go.work", Old: oldWork, New: newWork})
		}
		if !*check {
			return ws.Apply(changes)
		}
		if len(changes) > 0 {
			for _, c := range changes {
				fmt.Fprint(os.Stderr, c.Diff(scratch))
			}
			return fmt.Errorf("go mod tidy would change %d files (run make tidy)", len(changes))
		}
		fmt.Println("tidy-check: every module is tidy")
		return nil
	}

	if *version == "" {
		return errors.New(usage)
	}
	at, err := ws.SetVersion(*version)
	if err != nil {
		return err
	}
	if err := at.WriteProxy(ctx, proxyDir, at.AllAt(*version)); err != nil {
		return err
	}
	g, err := newGo(ctx, at, proxyDir, *modCache, *verbose)
	if err != nil {
		return err
	}
	err = at.Check(ctx, g, scratch, func(m release.Module) {
		fmt.Printf("release check: %s: go mod tidy changes nothing; go build ./... and go vet ./... pass\n", m.Path)
	})
	if err != nil {
		return err
	}
	fmt.Printf("release check: every module builds and vets on its own with its siblings at %s\n", *version)
	var pkgs []string
	for _, p := range strings.Split(*install, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pkgs = append(pkgs, p)
		}
	}
	report, err := at.Install(ctx, g, scratch, filepath.Join(scratch, "bin"), *version, pkgs)
	if err != nil {
		return err
	}
	fmt.Printf("release check: go install %s@%s works:\n%s", strings.Join(pkgs, "@"+*version+" "), *version, report)
	if *write {
		versions, err := at.SiblingVersions()
		if err != nil {
			return err
		}
		_, work, err := at.GoWork(versions)
		if err != nil {
			return err
		}
		if err := at.WriteGoMods(); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(at.Root, "go.work"), work, 0o644); err != nil {
			return err
		}
		fmt.Printf("release check: wrote go.work and the go.mod files that require %s\n", *version)
	}
	return nil
}

func newGo(ctx context.Context, ws *release.Workspace, proxyDir, modCache string, verbose bool) (*release.Go, error) {
	g, err := release.NewGo(ctx, ws, proxyDir, modCache)
	if err != nil {
		return nil, err
	}
	if verbose {
		g.Log = os.Stderr
	}
	return g, nil
}
