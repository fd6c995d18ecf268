package launcher

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"

	"github.com/dlock-go/dlock/internal/topology"
)

// Private returns a copy of base for a test's own servers, beside the
// standard ones: named name, its nodes name-1, name-2, ... (or name for a
// single node), the variable DLOCK_<NAME>_URL, and every port replaced by one
// that is free now, drawn at random below the kernel's ephemeral range (where
// an outgoing connection could take it before the server starts). Run it
// with its own launcher: New(t.TempDir(), []topology.Topology{tp}).
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

// freePort draws a port in 20000-31999 that nothing listens on and that is
// not in used, and adds it to used.
func freePort(used map[int]bool) (int, error) {
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if used[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(topology.Host, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		used[p] = true
		return p, nil
	}
	return 0, errors.New("no free port found in 20000-31999")
}
