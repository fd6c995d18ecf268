package launcher

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"

	"github.com/dlock-go/dlock/internal/topology"
)

// hostsFileName is where a peer-routed node's hosts file is written, in its
// data directory.
const hostsFileName = "hosts"

// withHosts returns the command that runs path with args seeing hostsFile
// as /etc/hosts, for a node of a PeerRouted topology. unshare(1) gives the
// process a mount namespace of its own, with private propagation so that
// nothing it mounts reaches the host; a shell bind-mounts the file over
// /etc/hosts there and execs the server. Both exec in place, so the
// recorded PID is the server's. The network namespace is the host's: the
// server still listens and dials on loopback. Without root, a user
// namespace mapping the caller to root allows the mount.
func withHosts(path string, args []string, hostsFile string) (string, []string, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return "", nil, fmt.Errorf("a peer-routed node runs under unshare (util-linux): %w", err)
	}
	u := []string{"--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		u = append([]string{"--user", "--map-root-user"}, u...)
	}
	u = append(u, "/bin/sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hostsFile, path)
	return unshare, append(u, args...), nil
}

// waitListening waits until port of node n accepts connections (see
// topology.StartGate).
func (l *Launcher) waitListening(ctx context.Context, n topology.Node, port string) error {
	addr := net.JoinHostPort(topology.Host, strconv.Itoa(n.Port(port)))
	return l.await(ctx, n, "listening on "+addr, func(ctx context.Context) error {
		conn, err := dial(ctx, addr)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}
