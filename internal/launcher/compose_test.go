package launcher

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/topology"
)

// service is what the consistency test reads from a compose file.
type service struct {
	image   string
	command []string
	env     map[string]string
	config  string // target /conf/zoo.cfg: its content
}

// readCompose reads the services of a compose file written in the layout
// topology.Compose produces (the up-to-date test in internal/topology
// keeps the files in that layout). It is deliberately independent of the
// generator: it reads what is on disk.
func readCompose(path string) (map[string]*service, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	services := map[string]*service{}
	configs := map[string]string{}
	var section, name, block string
	var cur *service
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		text := strings.TrimSpace(line)
		switch {
		case indent == 0:
			section = strings.TrimSuffix(text, ":")
		case indent == 2 && strings.HasSuffix(text, ":"):
			name = strings.TrimSuffix(text, ":")
			if section == "services" {
				cur = &service{env: map[string]string{}}
				services[name] = cur
			}
		case section == "configs" && indent == 4:
			block = name
		case section == "configs" && indent >= 6:
			configs[block] += text + "\n"
		case section == "services" && indent == 4:
			k, v, _ := strings.Cut(text, ": ")
			switch k {
			case "image":
				cur.image = v
			case "command":
				if err := json.Unmarshal([]byte(v), &cur.command); err != nil {
					return nil, fmt.Errorf("%s: %s command: %w", path, name, err)
				}
			}
			block = strings.TrimSuffix(k, ":")
		case section == "services" && indent == 6 && block == "environment":
			k, v, _ := strings.Cut(text, ": ")
			var s string
			if err := json.Unmarshal([]byte(v), &s); err != nil {
				return nil, fmt.Errorf("%s: %s env %s: %w", path, name, k, err)
			}
			cur.env[k] = s
		case section == "services" && block == "configs" && strings.HasPrefix(text, "- source: "):
			cur.config = strings.TrimPrefix(text, "- source: ")
		}
	}
	for _, s := range services {
		if s.config != "" {
			s.config = configs[s.config]
		}
	}
	return services, sc.Err()
}

var portRE = regexp.MustCompile(`\b\d{4,5}\b`)

// ports returns the port numbers mentioned in ss that belong to nodes of ts.
func ports(ts []topology.Topology, ss ...string) []int {
	known := map[int]bool{}
	for _, p := range topology.AllPorts(ts) {
		known[p] = true
	}
	var ps []int
	for _, s := range ss {
		for _, m := range portRE.FindAllString(s, -1) {
			if p, _ := strconv.Atoi(m); known[p] && !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
	}
	slices.Sort(ps)
	return ps
}

// TestComposeMatchesLauncher compares every compose file with what the
// native launcher runs: the same nodes, and for each node the same server
// arguments (data directories aside), configuration and ports.
func TestComposeMatchesLauncher(t *testing.T) {
	ts := topology.All()
	for _, tp := range ts {
		t.Run(tp.Name, func(t *testing.T) {
			path := filepath.Join("..", "..", "compose", topology.ComposeFile(tp))
			services, err := readCompose(path)
			if err != nil {
				t.Fatal(err)
			}
			var want, got []string
			for _, n := range tp.Nodes {
				want = append(want, n.Name)
			}
			for name := range services {
				if name != topology.InitService(tp) {
					got = append(got, name)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%s has services %v, the launcher runs nodes %v", path, got, want)
			}
			for _, n := range tp.Nodes {
				checkNode(t, ts, tp, n, services[n.Name])
			}
			if init := tp.InitArgs(); init != nil {
				s := services[topology.InitService(tp)]
				if s == nil || !strings.Contains(strings.Join(s.command, " "), "redis-cli "+strings.Join(init, " ")) {
					t.Errorf("%s: %s does not run redis-cli %v", path, topology.InitService(tp), init)
				}
			}
		})
	}
}

func checkNode(t *testing.T, ts []topology.Topology, tp topology.Topology, n topology.Node, s *service) {
	t.Helper()
	const native = "/native/data/dir"
	program, args, files := nativeCommand(tp, n, native, false)
	inImage := topology.ContainerDataDir(tp.Kind)
	if s.image != tp.Image {
		t.Errorf("%s: image %q, want %q", n.Name, s.image, tp.Image)
	}

	// What the launcher runs, with its data directory replaced by the
	// image's, against what compose runs.
	var launched, composed []string
	switch tp.Kind {
	case topology.ZooKeeper:
		launched = []string{strings.ReplaceAll(files["zoo.cfg"], native, inImage), "myid=" + strings.TrimSpace(files["myid"])}
		composed = []string{s.config, "myid=" + s.env["ZOO_MY_ID"]}
		if program != "java" || !slices.Contains(args, zkMain) {
			t.Errorf("%s: launcher runs %s %v, not %s", n.Name, program, args, zkMain)
		}
	case topology.Redis:
		launched = append([]string{program}, args...)
		for i := range launched {
			launched[i] = strings.ReplaceAll(launched[i], native, inImage)
		}
		composed = s.command
		if tp.IsSentinel(n) {
			// The Sentinel copies its config into its data directory,
			// where it can rewrite it, then runs the same command.
			launched = append(launched, files[topology.SentinelConfFile])
			prefix := "cp /conf/" + topology.SentinelConfFile + " " + inImage + "/" + topology.SentinelConfFile + " && exec "
			if len(s.command) != 3 || s.command[0] != "sh" || !strings.HasPrefix(s.command[2], prefix) {
				t.Errorf("%s: compose runs %q, not sh -c %q...", n.Name, s.command, prefix)
				return
			}
			composed = nil
			for _, f := range strings.Fields(strings.TrimPrefix(s.command[2], prefix)) {
				composed = append(composed, strings.ReplaceAll(f, "''", ""))
			}
			composed = append(composed, s.config)
		}
	case topology.Postgres:
		// The launcher adds its own data and socket directories.
		launched = append([]string{program}, args[4:]...)
		composed = s.command
		if !slices.Equal(args[:4], []string{"-D", native, "-k", native}) {
			t.Errorf("%s: launcher args start %v", n.Name, args[:4])
		}
		for k, v := range map[string]string{"POSTGRES_USER": topology.PostgresUser, "POSTGRES_PASSWORD": topology.PostgresPassword,
			"POSTGRES_DB": topology.PostgresDB, "PGPORT": strconv.Itoa(n.Port(topology.Client))} {
			if s.env[k] != v {
				t.Errorf("%s: compose %s=%q, want %q", n.Name, k, s.env[k], v)
			}
		}
	default:
		launched = append([]string{program}, args...)
		for i := range launched {
			launched[i] = strings.ReplaceAll(launched[i], native, inImage)
		}
		composed = s.command
	}

	lp, cp := ports(ts, launched...), ports(ts, composed...)
	var np []int
	for _, p := range n.Ports {
		np = append(np, p.Number)
	}
	if tp.Kind == topology.ZooKeeper && !tp.Cluster {
		np = np[:1]
	}
	if !slices.Equal(lp, cp) {
		t.Errorf("%s: ports differ: launcher uses %v, compose %v", n.Name, lp, cp)
	}
	for _, p := range np {
		if !slices.Contains(lp, p) {
			t.Errorf("%s: launcher command does not mention its %d port", n.Name, p)
		}
	}
	if !slices.Equal(launched, composed) {
		t.Errorf("%s: launcher and compose differ:\nlauncher: %q\ncompose:  %q", n.Name, launched, composed)
	}
}
