// Package topology is the one description of the servers dlock is tested
// against: which topologies exist, their nodes, every port they use, the
// environment variable tests read, and the server arguments and config files
// of each node.
//
// Both the native launcher (internal/launcher) and the docker compose files
// under compose/ are derived from this package, so the two cannot disagree
// on a node or a port; a test in this package fails when a compose file no
// longer matches what the launcher runs.
package topology

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Host is the only address servers listen on.
const Host = "127.0.0.1"

// Kind is the server software a topology runs.
type Kind string

// The kinds of server.
const (
	Redis     Kind = "redis"
	Etcd      Kind = "etcd"
	ZooKeeper Kind = "zookeeper"
	Consul    Kind = "consul"
	Postgres  Kind = "postgres"
)

// Port names. Every node has a Client port; the others depend on the kind.
const (
	Client    = "client"   // what clients connect to; the port in the URL
	Bus       = "bus"      // Redis Cluster bus
	Peer      = "peer"     // etcd peer traffic
	Quorum    = "quorum"   // ZooKeeper follower-to-leader
	Election  = "election" // ZooKeeper leader election
	GRPC      = "grpc"     // Consul gRPC
	ServerRPC = "server"   // Consul server RPC
	SerfLAN   = "serf_lan" // Consul gossip, LAN
	SerfWAN   = "serf_wan" // Consul gossip, WAN
	DNS       = "dns"      // Consul DNS
)

// Port is one named TCP (or, for Consul's serf and DNS, also UDP) port.
type Port struct {
	Name   string
	Number int
}

// Node is one server process.
type Node struct {
	// Name identifies the node in the launcher and is the compose service
	// name: the topology name for a single-node topology, else
	// "<topology>-<ID>" (redlock-1 ... redlock-5).
	Name string
	// ID is the node's 1-based index in its topology (ZooKeeper's myid).
	ID int
	// Ports lists every port the node listens on, the Client port first.
	Ports []Port
	// Args are extra server arguments appended to the generated ones.
	Args []string
}

// Port returns the number of the named port, or 0 if the node has none.
func (n Node) Port(name string) int {
	for _, p := range n.Ports {
		if p.Name == name {
			return p.Number
		}
	}
	return 0
}

// Addr is the node's client address, host:port.
func (n Node) Addr() string { return Host + ":" + strconv.Itoa(n.Port(Client)) }

// Topology is a set of nodes that together form one backend endpoint.
type Topology struct {
	Name string
	Kind Kind
	// Cluster is true when the nodes form one cluster (Redis Cluster, an
	// etcd cluster, a ZooKeeper ensemble) rather than being independent.
	Cluster bool
	// Sentinel makes a Redis topology a primary (the first node), its
	// replica (the second) and Sentinels (the others) that monitor the
	// primary as SentinelMaster, with a quorum of two. Clients reach it
	// through the Sentinels.
	Sentinel bool
	// Replicas is the number of replicas of each master of a Redis
	// Cluster: the first len(Nodes)/(1+Replicas) nodes are created as
	// the masters, the others as their replicas.
	Replicas int
	// EnvVar is the variable tests read the URL from (see URL).
	EnvVar string
	// Scheme is the URL scheme of the dlock backend that uses it.
	Scheme string
	// Image is the official docker image the compose file runs.
	Image string
	Nodes []Node
	// PeerRouted makes the nodes of an etcd or ZooKeeper cluster reach
	// each other by name through per-pair routes where a proxy can cut
	// them (see PeerDomain, RouteAddr, RoutePorts, LateRoute, StartGate
	// and Hosts). Only the native launcher runs such a topology; the
	// standard topologies are never routed.
	PeerRouted bool
}

// URL is the endpoint tests connect to, e.g. redlock://127.0.0.1:6380,....
func (t Topology) URL() string {
	if t.Kind == Postgres {
		return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable",
			PostgresUser, PostgresPassword, t.Nodes[0].Addr(), PostgresDB)
	}
	var addrs []string
	for _, n := range t.Nodes {
		switch {
		case t.Sentinel && !t.IsSentinel(n):
		case t.Cluster && t.Kind == Redis && n.ID > len(t.Nodes)/(1+t.Replicas):
			// The masters are the seeds; the client finds the replicas.
		default:
			addrs = append(addrs, n.Addr())
		}
	}
	u := t.Scheme + "://" + strings.Join(addrs, ",")
	if t.Sentinel {
		u += "?master_name=" + SentinelMaster
	}
	return u
}

// SentinelMaster is the name the Sentinels of a Sentinel topology know
// its primary by.
const SentinelMaster = "mymaster"

// IsSentinel reports whether n is one of the Sentinels of a Sentinel
// topology (not its primary or its replica).
func (t Topology) IsSentinel(n Node) bool { return t.Sentinel && n.ID > 2 }

// Node returns the node with the given name.
func (t Topology) Node(name string) (Node, bool) {
	for _, n := range t.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// The PostgreSQL role, password and database of the postgres topology.
const (
	PostgresUser     = "dlock"
	PostgresPassword = "dlock"
	PostgresDB       = "dlock"
)

// All returns every topology, in the order they are started and listed.
// The result is a fresh copy; callers may modify it.
func All() []Topology {
	return []Topology{
		{
			Name: "redis", Kind: Redis, EnvVar: "DLOCK_REDIS_URL", Scheme: "redis",
			Image: "redis:7.0.15",
			Nodes: nodes("redis", 1, func(i int) []Port {
				return []Port{{Client, 6379}}
			}),
		},
		{
			Name: "redlock", Kind: Redis, EnvVar: "DLOCK_REDLOCK_URL", Scheme: "redlock",
			Image: "redis:7.0.15",
			Nodes: nodes("redlock", 5, func(i int) []Port {
				return []Port{{Client, 6379 + i}}
			}),
		},
		{
			// redis-cluster-1 ... -3 are the masters, -4 ... -6 their
			// replicas.
			Name: "redis-cluster", Kind: Redis, Cluster: true, Replicas: 1,
			EnvVar: "DLOCK_REDIS_CLUSTER_URL", Scheme: "redis+cluster",
			Image: "redis:7.0.15",
			Nodes: nodes("redis-cluster", 6, func(i int) []Port {
				return []Port{{Client, 6999 + i}, {Bus, 16999 + i}}
			}),
		},
		{
			Name: "etcd", Kind: Etcd, EnvVar: "DLOCK_ETCD_URL", Scheme: "etcd",
			Image: "gcr.io/etcd-development/etcd:v3.4.23",
			Nodes: nodes("etcd", 1, func(i int) []Port {
				return []Port{{Client, 2379}, {Peer, 12379}}
			}),
		},
		{
			Name: "etcd3", Kind: Etcd, Cluster: true, EnvVar: "DLOCK_ETCD3_URL", Scheme: "etcd",
			Image: "gcr.io/etcd-development/etcd:v3.4.23",
			Nodes: nodes("etcd3", 3, func(i int) []Port {
				return []Port{{Client, 2380 + i}, {Peer, 12380 + i}}
			}),
		},
		{
			Name: "zookeeper", Kind: ZooKeeper, EnvVar: "DLOCK_ZK_URL", Scheme: "zk",
			Image: "zookeeper:3.8.0",
			Nodes: nodes("zookeeper", 1, func(i int) []Port {
				return []Port{{Client, 2181}}
			}),
		},
		{
			Name: "zookeeper3", Kind: ZooKeeper, Cluster: true, EnvVar: "DLOCK_ZK3_URL", Scheme: "zk",
			Image: "zookeeper:3.8.0",
			Nodes: nodes("zookeeper3", 3, func(i int) []Port {
				return []Port{{Client, 2181 + i}, {Quorum, 2887 + i}, {Election, 3887 + i}}
			}),
		},
		{
			Name: "consul", Kind: Consul, EnvVar: "DLOCK_CONSUL_URL", Scheme: "consul",
			Image: "hashicorp/consul:1.14.5",
			Nodes: nodes("consul", 1, func(i int) []Port {
				return []Port{{Client, 8500}, {GRPC, 8502}, {ServerRPC, 8300},
					{SerfLAN, 8301}, {SerfWAN, 8302}, {DNS, 8600}}
			}),
		},
		{
			Name: "postgres", Kind: Postgres, EnvVar: "DLOCK_POSTGRES_URL", Scheme: "postgres",
			Image: "postgres:15",
			Nodes: nodes("postgres", 1, func(i int) []Port {
				return []Port{{Client, 5433}}
			}),
		},
		{
			// redis-sentinel-1 is the primary, -2 its replica, -3 ... -5
			// the Sentinels.
			Name: "redis-sentinel", Kind: Redis, Sentinel: true,
			EnvVar: "DLOCK_REDIS_SENTINEL_URL", Scheme: "redis+sentinel",
			Image: "redis:7.0.15",
			Nodes: nodes("redis-sentinel", 5, func(i int) []Port {
				if i <= 2 {
					return []Port{{Client, 6384 + i}}
				}
				return []Port{{Client, 26376 + i}}
			}),
		},
	}
}

// nodes builds count nodes named after the topology, with ports(i) for the
// node with ID i.
func nodes(topology string, count int, ports func(i int) []Port) []Node {
	ns := make([]Node, count)
	for i := range ns {
		id := i + 1
		name := topology
		if count > 1 {
			name = fmt.Sprintf("%s-%d", topology, id)
		}
		ns[i] = Node{Name: name, ID: id, Ports: ports(id)}
	}
	return ns
}

// Lookup returns the topology with the given name from ts.
func Lookup(ts []Topology, name string) (Topology, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t, true
		}
	}
	return Topology{}, false
}

// FindNode returns the topology holding the named node, and the node. For a
// single-node topology "<name>-1" is accepted for the node "<name>".
func FindNode(ts []Topology, name string) (Topology, Node, bool) {
	for _, t := range ts {
		if n, ok := t.Node(name); ok {
			return t, n, true
		}
		if len(t.Nodes) == 1 && name == t.Name+"-1" {
			return t, t.Nodes[0], true
		}
	}
	return Topology{}, Node{}, false
}

// EnvName turns a topology name into the middle of its variable name:
// redis-cluster becomes REDIS_CLUSTER.
func EnvName(name string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// Names returns the names of ts, in order.
func Names(ts []Topology) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// Check reports the first inconsistency in ts: duplicate topology or node
// names, a port used twice, a node without a client port, or a kind's
// required port missing.
func Check(ts []Topology) error {
	topos := map[string]bool{}
	nodeNames := map[string]bool{}
	ports := map[int]string{}
	for _, t := range ts {
		if t.Name == "" || topos[t.Name] {
			return fmt.Errorf("topology name %q is empty or used twice", t.Name)
		}
		topos[t.Name] = true
		if len(t.Nodes) == 0 {
			return fmt.Errorf("topology %s has no nodes", t.Name)
		}
		if err := checkRouted(t); err != nil {
			return err
		}
		for _, n := range t.Nodes {
			if nodeNames[n.Name] {
				return fmt.Errorf("node name %q is used twice", n.Name)
			}
			nodeNames[n.Name] = true
			if len(n.Ports) == 0 || n.Ports[0].Name != Client {
				return fmt.Errorf("node %s: the first port must be the client port", n.Name)
			}
			for _, need := range requiredPorts(t) {
				if n.Port(need) == 0 {
					return fmt.Errorf("node %s: a %s node needs a %s port", n.Name, t.Kind, need)
				}
			}
			for _, p := range n.Ports {
				if p.Number <= 0 || p.Number > 65535 {
					return fmt.Errorf("node %s: %s port %d out of range", n.Name, p.Name, p.Number)
				}
				if other, dup := ports[p.Number]; dup {
					return fmt.Errorf("port %d is used by both %s and %s %s", p.Number, other, n.Name, p.Name)
				}
				ports[p.Number] = n.Name + " " + p.Name
			}
		}
	}
	return nil
}

func requiredPorts(t Topology) []string {
	switch {
	case t.Kind == Redis && t.Cluster:
		return []string{Bus}
	case t.Kind == Etcd:
		return []string{Peer}
	case t.Kind == ZooKeeper && t.Cluster:
		return []string{Quorum, Election}
	case t.Kind == Consul:
		return []string{GRPC, ServerRPC, SerfLAN, SerfWAN, DNS}
	}
	return nil
}

// AllPorts returns every port number the topologies use, sorted.
func AllPorts(ts []Topology) []int {
	var ps []int
	for _, t := range ts {
		for _, n := range t.Nodes {
			for _, p := range n.Ports {
				ps = append(ps, p.Number)
			}
		}
	}
	sort.Ints(ps)
	return ps
}

// Offset returns a copy of ts with every port moved up by delta, for
// running a second, private set of servers next to the standard one (the
// launcher's DLOCK_PORT_OFFSET). Compose files always use the standard
// ports.
func Offset(ts []Topology, delta int) []Topology {
	out := make([]Topology, len(ts))
	for i, t := range ts {
		t.Nodes = append([]Node(nil), t.Nodes...)
		for j, n := range t.Nodes {
			n.Ports = append([]Port(nil), n.Ports...)
			for k := range n.Ports {
				n.Ports[k].Number += delta
			}
			t.Nodes[j] = n
		}
		out[i] = t
	}
	return out
}
