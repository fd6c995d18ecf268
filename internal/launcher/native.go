package launcher

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/internal/topology"
)

// ZooKeeper runs straight from the Debian jars: zkServer.sh expects system
// paths. zookeeper.jar's manifest names its own dependencies; slf4j-simple
// makes it log to stderr, which goes to the node's log file.
const zkMain = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

var zkJars = []string{"/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"}

// nativeCommand is how node n is run on this host: the program (a name
// resolved by lookPath, not yet a path), its arguments, and the files to
// write into dataDir first (with the hosts file of a peer-routed node, which
// start then runs under withHosts). It is pure: nothing is looked up or
// written.
func nativeCommand(t topology.Topology, n topology.Node, dataDir string, aof bool) (program string, args []string, files map[string]string) {
	s := t.Server(n, topology.Options{DataDir: dataDir, AOF: aof})
	if s.Hosts != "" {
		files = map[string]string{hostsFileName: s.Hosts}
		for name, content := range s.Files {
			files[name] = content
		}
		s.Files = files
	}
	if command := kindOf(t.Kind).command; command != nil {
		program, args = command(s, dataDir)
		return program, args, s.Files
	}
	return s.Program, s.Args, s.Files
}

// zooKeeperCommand runs QuorumPeerMain from the jars on a JVM.
func zooKeeperCommand(s topology.Server, dataDir string) (string, []string) {
	args := append(strings.Fields(topology.ZooKeeperJVMFlags),
		"-Djava.net.preferIPv4Stack=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		// Every go-zookeeper connection is "from old client": a
		// warning per connection buries the useful ones.
		"-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.ZooKeeperServer=error",
		"-cp", zkClasspath(), zkMain)
	return "java", append(args, s.Args...)
}

// postgresCommand adds the data and socket directories, which the image
// sets for itself.
func postgresCommand(s topology.Server, dataDir string) (string, []string) {
	return s.Program, append([]string{"-D", dataDir, "-k", dataDir}, s.Args...)
}

// zkClasspath is DLOCK_ZK_CLASSPATH if set, else the Debian jars.
func zkClasspath() string {
	if cp := os.Getenv("DLOCK_ZK_CLASSPATH"); cp != "" {
		return cp
	}
	return strings.Join(zkJars, ":")
}

// installHint is appended to "not found" errors.
const installHint = "run `make deps` (scripts/install-deps.sh) to install the servers"

// lookPath resolves a program name to an executable. Environment overrides
// (DLOCK_<PROGRAM>_BIN, e.g. DLOCK_CONSUL_BIN) come first.
func lookPath(program string) (string, error) {
	env := "DLOCK_" + strings.ToUpper(strings.NewReplacer("-", "_").Replace(program)) + "_BIN"
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	switch program {
	case "java":
		for _, jar := range zkJars {
			if os.Getenv("DLOCK_ZK_CLASSPATH") == "" {
				if _, err := os.Stat(jar); err != nil {
					return "", fmt.Errorf("ZooKeeper jar %s not found: %s", jar, installHint)
				}
			}
		}
	case topology.PostgresServer, "initdb", "pg_isready", "psql":
		if dir := postgresBinDir(); dir != "" {
			return filepath.Join(dir, program), nil
		}
	case topology.ConsulAgent:
		// The version scripts/install-consul.sh installs comes first.
		if gp := goPath(); gp != "" {
			p := filepath.Join(gp, "bin", "consul")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		if p, err := exec.LookPath(program); err == nil {
			return p, nil
		}
		return "", fmt.Errorf("consul not found in $(go env GOPATH)/bin or on PATH: run scripts/install-consul.sh")
	}
	p, err := exec.LookPath(program)
	if err != nil {
		return "", fmt.Errorf("%s not found: %s", program, installHint)
	}
	return p, nil
}

// postgresBinDir is the newest /usr/lib/postgresql/<version>/bin holding a
// postgres server (Debian keeps the server binaries off PATH).
func postgresBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(dirs, func(i, j int) bool {
		return versionOf(dirs[i]) > versionOf(dirs[j])
	})
	if len(dirs) == 0 {
		return ""
	}
	return filepath.Dir(dirs[0])
}

func versionOf(p string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return v
}

// goPath is $(go env GOPATH), without running go when GOPATH or HOME say it.
func goPath() string {
	if gp := os.Getenv("GOPATH"); gp != "" {
		return filepath.SplitList(gp)[0]
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		if gp := strings.TrimSpace(string(out)); gp != "" {
			return filepath.SplitList(gp)[0]
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, "go")
	}
	return ""
}
