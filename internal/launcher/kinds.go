package launcher

import (
	"context"
	"fmt"
	"io"
	"syscall"

	"github.com/dlock-go/dlock/internal/topology"
)

// kind is everything the launcher does differently for one kind of server.
// A new kind of server is one entry in kinds (and its topology.Server
// case); the launcher has no other per-kind branches. A nil field means the
// kind needs nothing there.
type kind struct {
	// probe checks once that node n answers as a server of this kind.
	// Every kind has one.
	probe func(ctx context.Context, t topology.Topology, n topology.Node) error
	// command turns the node's generic server command into the one run
	// on this host: the program (a name for lookPath) and its arguments.
	// Nil: s.Program with s.Args.
	command func(s topology.Server, dataDir string) (program string, args []string)
	// prepare runs before the node's process starts (fresh: its data
	// directory was just created), and returns the credential to run it
	// with (nil: the current user's).
	prepare func(l *Launcher, ctx context.Context, dir string, fresh bool, log io.Writer) (*syscall.Credential, error)
	// form does what the topology needs once all its nodes answer (create
	// a cluster, wait for Sentinels, run a first query).
	form func(l *Launcher, ctx context.Context, t topology.Topology) error
	// member waits until a node restarted into a formed topology serves
	// as its member again.
	member func(l *Launcher, ctx context.Context, t topology.Topology, n topology.Node) error
	// isLeader asks node n, once, whether it leads its topology. Nil: the
	// kind elects no leader, and only a single node is one.
	isLeader func(ctx context.Context, n topology.Node) (bool, error)
	// stopSignal, when set, is the signal of a graceful stop, and Down
	// stops the kind gracefully rather than killing it (its processes
	// outlive a killed parent). Zero: SIGTERM for Stop, SIGKILL for Down.
	stopSignal syscall.Signal
	// dataOutsideAsRoot keeps the data under the system temporary
	// directory when the launcher runs as root (the server then runs as
	// another user, who may not be able to enter the checkout).
	dataOutsideAsRoot bool
}

// kinds describes every kind of server a topology may run.
var kinds = map[topology.Kind]kind{
	topology.Redis: {
		probe:  probeRedis,
		form:   (*Launcher).formRedis,
		member: (*Launcher).redisMember,
	},
	topology.Etcd: {
		probe:    probeEtcd,
		isLeader: etcdIsLeader,
	},
	topology.ZooKeeper: {
		probe:    probeZooKeeper,
		command:  zooKeeperCommand,
		isLeader: zooKeeperIsLeader,
	},
	topology.Consul: {
		probe: probeConsul,
	},
	topology.Postgres: {
		probe:             probePostgres,
		command:           postgresCommand,
		prepare:           (*Launcher).preparePostgres,
		form:              (*Launcher).formPostgres,
		stopSignal:        syscall.SIGINT, // fast shutdown
		dataOutsideAsRoot: true,
	},
}

// Kinds returns the kinds of server the launcher can run, for the test
// that holds the tables listing backends to one another.
func Kinds() []topology.Kind {
	out := make([]topology.Kind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	return out
}

// kindOf returns the description of t's kind; for a kind the launcher does
// not know, one whose probe says so.
func kindOf(k topology.Kind) kind {
	if d, ok := kinds[k]; ok {
		return d
	}
	return kind{probe: func(context.Context, topology.Topology, topology.Node) error {
		return fmt.Errorf("no readiness check for kind %q", k)
	}}
}
