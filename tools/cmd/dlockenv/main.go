// Command dlockenv runs the real servers dlock is tested against, natively
// on 127.0.0.1, and keeps the compose files in step with them.
//
// Usage:
//
//	dlockenv up [-aof] [topology...]   start topologies (default: all), wait until ready
//	dlockenv down                      stop every node started here, remove their data
//	dlockenv status                    list nodes, PIDs and states
//	dlockenv env                       print the endpoints (and rewrite .dlock/endpoints.env)
//	dlockenv start [-aof=true|false] NODE   start one node again and wait until ready
//	dlockenv stop|kill|pause|resume NODE    SIGTERM / SIGKILL / SIGSTOP / SIGCONT one node
//	dlockenv leader TOPOLOGY           print the node leading an etcd or ZooKeeper cluster
//	dlockenv list                      list topologies, nodes and ports
//	dlockenv compose [-check] [DIR]    write (or check) the compose files, default compose/
//
// State is kept in .dlock/ at the module root, or $DLOCK_STATE_DIR. See
// CONTRIBUTING.md.
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
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/topology"
)

const usage = `usage: dlockenv COMMAND [ARGS]

  up [-aof] [topology...]      start topologies (default: all) and wait until ready
  down                         stop every node started here and remove their data
  status                       list nodes, PIDs and states
  env                          print the endpoints and rewrite .dlock/endpoints.env
  start [-aof=BOOL] NODE       start one node again and wait until it is ready
  stop NODE                    stop one node (SIGTERM, then SIGKILL after 15s)
  kill NODE                    SIGKILL one node
  pause NODE                   SIGSTOP one node
  resume NODE                  SIGCONT one node
  leader TOPOLOGY              print the node leading an etcd or ZooKeeper cluster
  list                         list topologies, nodes and ports
  compose [-check] [DIR]       write or check the compose files (default DIR: compose)

Topologies: %s
State: .dlock/ at the module root, or $%s.
`

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, usage, strings.Join(topology.Names(topology.All()), ", "), launcher.StateDirVar)
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, flag.Arg(0), flag.Args()[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dlockenv:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cmd string, args []string) error {
	if cmd == "compose" {
		return compose(args)
	}
	if cmd == "list" {
		list()
		return nil
	}
	l, err := launcher.Default()
	if err != nil {
		return err
	}
	l.Out = os.Stderr
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	switch cmd {
	case "up":
		aof := fs.Bool("aof", false, "start Redis nodes with appendonly yes, appendfsync always")
		_ = fs.Parse(args)
		began := time.Now()
		if err := l.Up(ctx, fs.Args(), launcher.AOF(*aof)); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "up in %.1fs; endpoints in %s\n", time.Since(began).Seconds(), rel(l.EndpointsFile()))
		return nil
	case "down":
		return l.Down(ctx)
	case "status":
		return status(ctx, l)
	case "env":
		env := l.EndpointsEnv()
		fmt.Print(env)
		if len(l.Endpoints()) == 0 {
			return nil
		}
		return os.WriteFile(l.EndpointsFile(), []byte(env), 0o644)
	case "start":
		var opts []launcher.Option
		fs.Func("aof", "`true` or false: restart with or without appendonly/appendfsync always", func(s string) error {
			on := s == "true" || s == "1"
			if !on && s != "false" && s != "0" {
				return fmt.Errorf("want true or false")
			}
			opts = append(opts, launcher.AOF(on))
			return nil
		})
		_ = fs.Parse(args)
		node, err := oneArg(cmd, fs.Args())
		if err != nil {
			return err
		}
		return l.Start(ctx, node, opts...)
	case "stop", "kill", "pause", "resume":
		node, err := oneArg(cmd, args)
		if err != nil {
			return err
		}
		do := map[string]func(context.Context, string) error{
			"stop": l.Stop, "kill": l.Kill, "pause": l.Pause, "resume": l.Resume,
		}[cmd]
		return do(ctx, node)
	case "leader":
		topo, err := oneArg(cmd, args)
		if err != nil {
			return err
		}
		leader, err := l.Leader(ctx, topo)
		if err != nil {
			return err
		}
		fmt.Println(leader)
		return nil
	}
	flag.Usage()
	return fmt.Errorf("unknown command %q", cmd)
}

func oneArg(cmd string, args []string) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("%s takes exactly one argument", cmd)
	}
	return args[0], nil
}

func status(ctx context.Context, l *launcher.Launcher) error {
	st, err := l.Status(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tTOPOLOGY\tADDRESS\tPID\tSTATE")
	for _, s := range st {
		pid, state := "-", s.State
		if s.PID > 0 {
			pid = fmt.Sprint(s.PID)
		}
		if s.AOF {
			state += " (aof)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Node, s.Topology, s.Addr, pid, state)
	}
	return w.Flush()
}

func list() {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TOPOLOGY\tNODE\tPORTS\tVARIABLE")
	for _, t := range topology.All() {
		for i, n := range t.Nodes {
			var ps []string
			for _, p := range n.Ports {
				ps = append(ps, fmt.Sprintf("%s=%d", p.Name, p.Number))
			}
			v := ""
			if i == 0 {
				v = t.EnvVar + "=" + t.URL()
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.Name, n.Name, strings.Join(ps, " "), v)
		}
	}
	_ = w.Flush()
}

// compose writes every compose file into dir, or with -check reports the
// ones that differ from what internal/topology generates.
func compose(args []string) error {
	fs := flag.NewFlagSet("compose", flag.ExitOnError)
	check := fs.Bool("check", false, "only report files that are out of date")
	_ = fs.Parse(args)
	dir := "compose"
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	ts := topology.All()
	files := map[string][]byte{"compose.yaml": topology.ComposeAll(ts)}
	for _, t := range ts {
		files[topology.ComposeFile(t)] = topology.Compose(t)
	}
	var stale []string
	for name, want := range files {
		path := filepath.Join(dir, name)
		if *check {
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
				stale = append(stale, path)
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return errors.New("out of date (run `go run ./tools/cmd/dlockenv compose`): " + strings.Join(stale, " "))
	}
	return nil
}

func rel(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return p
}
