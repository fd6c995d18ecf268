package topology

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Options select how a node is run.
type Options struct {
	// DataDir is where the node keeps its data: a directory under .dlock/
	// natively, a path inside the container in a compose file.
	DataDir string
	// AOF makes a Redis node persist every write before replying
	// (appendonly yes, appendfsync always), for fault tests that restart a
	// node and need it to remember. By default Redis keeps nothing on disk.
	AOF bool
}

// Server is how one node is run, independent of where it runs.
type Server struct {
	// Program is the server's command: redis-server, etcd, consul,
	// postgres, or "zookeeper" (QuorumPeerMain; started by java natively
	// and by the image's own script in compose).
	Program string
	// Args are the program's arguments. For postgres the native launcher
	// adds the data and socket directories (-D, -k); the image sets its own.
	Args []string
	// Files are written into DataDir before the node starts, by name.
	Files map[string]string
	// Hosts, when set, is the hosts file the node must see as /etc/hosts
	// (a PeerRouted topology); the launcher mounts it in a mount namespace
	// of the node's own.
	Hosts string
}

// Program names.
const (
	RedisServer     = "redis-server"
	EtcdServer      = "etcd"
	ConsulAgent     = "consul"
	PostgresServer  = "postgres"
	ZooKeeperServer = "zookeeper"
)

// ZooKeeper settings shared by every node: a 500 ms tick so that session
// timeouts down to 1 s (two ticks) are allowed.
const (
	zkTickMillis      = 500
	zkMaxSessionMilli = 60000
)

// Server returns how node n of t is run with options o.
func (t Topology) Server(n Node, o Options) Server {
	var s Server
	switch t.Kind {
	case Redis:
		s = t.redis(n, o)
	case Etcd:
		s = t.etcd(n, o)
	case ZooKeeper:
		s = t.zookeeper(n, o)
	case Consul:
		s = t.consul(n)
	case Postgres:
		s = t.postgres(n)
	default:
		panic(fmt.Sprintf("topology %s: unknown kind %q", t.Name, t.Kind))
	}
	if t.Kind != ZooKeeper {
		s.Args = append(s.Args, n.Args...)
	}
	if t.PeerRouted {
		s.Hosts = t.Hosts(n)
	}
	return s
}

// Sentinel settings: a primary unreachable for a second is down; a
// failover that has not finished in 10 s is tried again.
const (
	sentinelDownAfterMillis = 1000
	sentinelFailoverMillis  = 10000
	sentinelQuorum          = 2
)

// SentinelConf is the config file a Sentinel starts from (it rewrites it
// as it learns).
func (t Topology) SentinelConf(n Node) string {
	primary := t.Nodes[0]
	return fmt.Sprintf("sentinel monitor %s %s %d %d\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s %d\n",
		SentinelMaster, Host, primary.Port(Client), sentinelQuorum,
		SentinelMaster, sentinelDownAfterMillis,
		SentinelMaster, sentinelFailoverMillis)
}

// SentinelConfFile is the name of a Sentinel's config file in its data
// directory.
const SentinelConfFile = "sentinel.conf"

func (t Topology) redis(n Node, o Options) Server {
	if t.IsSentinel(n) {
		return Server{Program: RedisServer, Args: []string{
			path.Join(o.DataDir, SentinelConfFile), "--sentinel",
			"--bind", Host,
			"--port", strconv.Itoa(n.Port(Client)),
			"--dir", o.DataDir,
			"--daemonize", "no",
			"--logfile", "",
		}, Files: map[string]string{SentinelConfFile: t.SentinelConf(n)}}
	}
	args := []string{
		"--bind", Host,
		"--port", strconv.Itoa(n.Port(Client)),
		"--dir", o.DataDir,
		"--daemonize", "no",
		"--logfile", "",
		"--save", "",
	}
	if o.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if t.Sentinel && n.ID == 2 {
		args = append(args, "--replicaof", Host, strconv.Itoa(t.Nodes[0].Port(Client)))
	}
	if t.Cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(n.Port(Bus)),
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
		)
	}
	return Server{Program: RedisServer, Args: args}
}

func (t Topology) etcd(n Node, o Options) Server {
	peer := func(m Node) string { return "http://" + t.peerHost(m) + ":" + strconv.Itoa(m.Port(Peer)) }
	client := "http://" + n.Addr()
	initial := make([]string, len(t.Nodes))
	for i, m := range t.Nodes {
		initial[i] = m.Name + "=" + peer(m)
	}
	return Server{Program: EtcdServer, Args: []string{
		"--name", n.Name,
		"--data-dir", o.DataDir,
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", "http://" + Host + ":" + strconv.Itoa(n.Port(Peer)),
		"--initial-advertise-peer-urls", peer(n),
		"--initial-cluster", strings.Join(initial, ","),
		"--initial-cluster-token", t.Name,
		"--initial-cluster-state", "new",
		// As production should run it (lockctl doctor warns without
		// it): every acquire and release adds revisions, and a server
		// the test suites keep busy for hours would otherwise grow
		// its history without end.
		"--auto-compaction-mode", "revision",
		"--auto-compaction-retention", "10000",
		"--logger", "zap",
		"--log-level", "warn",
	}}
}

// zookeeper writes zoo.cfg and myid; the server is started with zoo.cfg.
// Extra node Args are extra zoo.cfg lines.
func (t Topology) zookeeper(n Node, o Options) Server {
	lines := []string{
		"tickTime=" + strconv.Itoa(zkTickMillis),
		"initLimit=20",
		"syncLimit=10",
		"maxSessionTimeout=" + strconv.Itoa(zkMaxSessionMilli),
		"dataDir=" + o.DataDir,
		"clientPort=" + strconv.Itoa(n.Port(Client)),
		"clientPortAddress=" + Host,
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
		"maxClientCnxns=0",
		"autopurge.purgeInterval=0",
	}
	if t.Cluster {
		lines = append(lines, "reconfigEnabled=false")
		for _, m := range t.Nodes {
			lines = append(lines, fmt.Sprintf("server.%d=%s:%d:%d", m.ID, t.peerHost(m), m.Port(Quorum), m.Port(Election)))
		}
	}
	lines = append(lines, n.Args...)
	return Server{
		Program: ZooKeeperServer,
		Args:    []string{path.Join(o.DataDir, "zoo.cfg")},
		Files: map[string]string{
			"zoo.cfg": strings.Join(lines, "\n") + "\n",
			"myid":    strconv.Itoa(n.ID) + "\n",
		},
	}
}

// consul runs a dev agent (in-memory, its own leader) on explicit ports,
// with update checks and anonymous usage reporting off.
func (t Topology) consul(n Node) Server {
	p := func(name string) string { return strconv.Itoa(n.Port(name)) }
	return Server{Program: ConsulAgent, Args: []string{
		"agent", "-dev",
		"-node", n.Name,
		"-bind", Host,
		"-advertise", Host,
		"-client", Host,
		"-http-port", p(Client),
		"-grpc-port", p(GRPC),
		"-server-port", p(ServerRPC),
		"-serf-lan-port", p(SerfLAN),
		"-serf-wan-port", p(SerfWAN),
		"-dns-port", p(DNS),
		"-hcl", "ports { https = -1, grpc_tls = -1 }",
		"-hcl", "disable_update_check = true",
		"-hcl", "disable_anonymous_signature = true",
		"-log-level", "warn",
	}}
}

func (t Topology) postgres(n Node) Server {
	return Server{Program: PostgresServer, Args: []string{
		"-p", strconv.Itoa(n.Port(Client)),
		"-c", "listen_addresses=" + Host,
		"-c", "max_connections=200",
	}}
}

// InitArgs is the redis-cli command that turns the nodes of a Redis Cluster
// topology into one cluster (3 masters, no replicas), or nil if the
// topology needs no such step.
func (t Topology) InitArgs() []string {
	if t.Kind != Redis || !t.Cluster {
		return nil
	}
	args := []string{"--cluster", "create"}
	for _, n := range t.Nodes {
		args = append(args, n.Addr())
	}
	return append(args, "--cluster-replicas", strconv.Itoa(t.Replicas), "--cluster-yes")
}
