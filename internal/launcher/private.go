package launcher

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/dlock-go/dlock/internal/topology"
)

// Private returns a copy of base for a test's own servers, beside the
// standard ones: named name, its nodes name-1, name-2, ... (or name for a
// single node), the variable DLOCK_<NAME>_URL, and every port replaced by one
// that is free now, drawn at random below the kernel's ephemeral range (where
// an outgoing connection could take it before the server starts), and
// claimed for this process: test processes running at the same time (go
// test runs packages in parallel) never draw the same port, although each
// sees it free until its server starts. Run it with its own launcher:
// New(t.TempDir(), []topology.Topology{tp}).
func Private(base topology.Topology, name string) (topology.Topology, error) {
	tp := base
	tp.Name = name
	tp.EnvVar = "DLOCK_" + topology.EnvName(name) + "_URL"
	tp.Nodes = nil
	used := map[int]bool{}
	for i, bn := range base.Nodes {
		n := topology.Node{ID: bn.ID, Name: name, Args: bn.Args}
		if len(base.Nodes) > 1 {
			n.Name = fmt.Sprintf("%s-%d", name, i+1)
		}
		for _, p := range bn.Ports {
			num, err := freePort(used)
			if err != nil {
				return tp, err
			}
			n.Ports = append(n.Ports, topology.Port{Name: p.Name, Number: num})
		}
		tp.Nodes = append(tp.Nodes, n)
	}
	return tp, topology.Check([]topology.Topology{tp})
}

// freePort draws a port in 20000-31999 that nothing listens on, that is
// not in used and that no other live process has claimed, claims it and
// adds it to used.
// handedOut holds the ports freePort has given this process: the claim
// files let one process take its own claims over again, so two private
// topologies made side by side in one process (the fault matrix's lanes)
// would otherwise be able to draw the same port before either listens.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

func freePort(used map[int]bool) (int, error) {
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if used[p] {
			continue
		}
		handedOut.Lock()
		taken := handedOut.ports[p]
		handedOut.ports[p] = true
		handedOut.Unlock()
		if taken {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(topology.Host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		if !claim(p) {
			continue
		}
		used[p] = true
		return p, nil
	}
	return 0, errors.New("no free port found in 20000-31999")
}

// claimDir holds one file per claimed port, named by the port and holding
// the claiming process's PID. A claim lasts as long as its process: a claim
// whose process is gone is stale, and the next claim of that port takes it
// over.
func claimDir() string { return filepath.Join(os.TempDir(), "dlock-launcher-ports") }

// claim claims port p for this process, and reports whether it could:
// false when another live process holds it. Claims are made under an
// exclusive flock of the directory's lock file, so that two processes
// cannot both take over one stale claim.
func claim(p int) bool {
	dir := claimDir()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true // no shared directory: the listen check alone
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return true
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return true
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	name := filepath.Join(dir, strconv.Itoa(p))
	if b, err := os.ReadFile(name); err == nil {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && pid != os.Getpid() && pid > 0 && syscall.Kill(pid, 0) != syscall.ESRCH {
			return false // a live process holds it
		}
	}
	// Free, stale (its process is gone) or this process's own claim.
	return os.WriteFile(name, []byte(strconv.Itoa(os.Getpid())), 0o666) == nil
}
