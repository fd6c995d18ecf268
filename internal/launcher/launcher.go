// Package launcher starts, stops and controls the real servers of the dlock
// test topologies (internal/topology) natively, from the Debian packages and
// the Consul binary, with no containers.
//
// State lives in a directory, .dlock/ at the module root by default:
//
//	.dlock/run/<node>.json   PID and process start time of each node
//	.dlock/data/<node>/      the node's data directory (PostgreSQL started by
//	                         root: under the system temporary directory)
//	.dlock/log/<node>.log    the node's stdout and stderr
//	.dlock/endpoints.env     DLOCK_*_URL variables of the topologies that are up
//
// A node of a peer-routed topology (topology.PeerRouted) also has a hosts
// file in its data directory, which it sees as /etc/hosts: it runs under
// unshare(1) in a mount namespace of its own (see withHosts).
//
// A process is only ever signalled after checking that its PID still has the
// recorded start time (/proc/PID/stat), so a recycled PID is never hit, and
// only processes the launcher started are touched. Operations on one state
// directory are serialised with a file lock, so tests in several packages
// may control nodes at once.
//
// Fault tests use the package-level functions, which act on the default
// state directory that `make up` populated:
//
//	if err := launcher.Kill(ctx, "redlock-3"); err != nil { ... }
//	leader, err := launcher.Leader(ctx, "etcd3")
//	err = launcher.Pause(ctx, leader)
package launcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/internal/topology"
)

// Environment variables read by Default.
const (
	// StateDirVar overrides the default state directory.
	StateDirVar = "DLOCK_STATE_DIR"
	// PortOffsetVar moves every port up by its value, to run a private set
	// of servers beside the standard one (use another state directory).
	PortOffsetVar = "DLOCK_PORT_OFFSET"
)

// Launcher controls the nodes of a set of topologies, with its state in Dir.
type Launcher struct {
	// Dir is the state directory (see the package documentation).
	Dir string
	// Topologies are the topologies this launcher knows.
	Topologies []topology.Topology
	// Out receives progress messages; nil discards them.
	Out io.Writer
	// ReadyTimeout bounds the wait for one node to become ready; zero
	// means two minutes (a JVM on a busy two-core machine is slow).
	ReadyTimeout time.Duration
	// Started, if set, is called with each node's name and PID as soon as
	// its process is spawned, before the launcher waits for it. Fault tests
	// use it to slow a node down as a loaded machine would.
	Started func(node string, pid int)
}

// New returns a launcher for ts with its state in dir.
func New(dir string, ts []topology.Topology) (*Launcher, error) {
	if err := topology.Check(ts); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return &Launcher{Dir: abs, Topologies: ts}, nil
}

// Default returns a launcher for every topology, with its state in
// $DLOCK_STATE_DIR or else .dlock/ at the root of the dlock module (found
// from the working directory upwards), and ports moved by
// $DLOCK_PORT_OFFSET if set (then the state defaults to .dlock/offset<N>).
func Default() (*Launcher, error) {
	ts := topology.All()
	delta := 0
	if s := os.Getenv(PortOffsetVar); s != "" {
		var err error
		if delta, err = strconv.Atoi(s); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", PortOffsetVar, s, err)
		}
		ts = topology.Offset(ts, delta)
		if err := outsideEphemeral(ts); err != nil {
			return nil, fmt.Errorf("%s=%d: %w", PortOffsetVar, delta, err)
		}
	}
	dir := os.Getenv(StateDirVar)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(root, ".dlock")
		if delta != 0 {
			// Never share state with the servers on the standard ports.
			dir = filepath.Join(dir, "offset"+strconv.Itoa(delta))
		}
	}
	return New(dir, ts)
}

// outsideEphemeral fails if a port of ts lies in the kernel's ephemeral
// range, where any outgoing connection may hold it (the standard ports are
// all below it).
func outsideEphemeral(ts []topology.Topology) error {
	low, high := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			low, _ = strconv.Atoi(f[0])
			high, _ = strconv.Atoi(f[1])
		}
	}
	for _, p := range topology.AllPorts(ts) {
		if p >= low && p <= high {
			return fmt.Errorf("port %d is in the ephemeral range %d-%d, where outgoing connections take ports; choose a smaller offset", p, low, high)
		}
	}
	return nil
}

const modulePath = "github.com/dlock-go/dlock"

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == modulePath {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the %s module: set %s", modulePath, StateDirVar)
		}
		dir = parent
	}
}

// record is what the launcher remembers of a node it started.
type record struct {
	Node     string        `json:"node"`
	Topology string        `json:"topology"`
	Kind     topology.Kind `json:"kind"`
	PID      int           `json:"pid"`
	Start    uint64        `json:"start_time"` // field 22 of /proc/PID/stat
	Argv     []string      `json:"argv"`
	AOF      bool          `json:"aof,omitempty"`
}

func (l *Launcher) runDir() string                { return filepath.Join(l.Dir, "run") }
func (l *Launcher) recordPath(node string) string { return filepath.Join(l.runDir(), node+".json") }
func (l *Launcher) upMarker(topo string) string   { return filepath.Join(l.runDir(), topo+".up") }
func (l *Launcher) logPath(node string) string    { return filepath.Join(l.Dir, "log", node+".log") }

// dataDir is where a node keeps its data. A server run by root as another
// user (PostgreSQL, as the postgres user) may not be able to enter the
// checkout (a clone under /root, say), so its data then lives under the
// system temporary directory, in a directory named after the state
// directory.
func (l *Launcher) dataDir(k topology.Kind, node string) string {
	if kindOf(k).dataOutsideAsRoot && os.Geteuid() == 0 {
		return filepath.Join(l.outsideDir(), node)
	}
	return filepath.Join(l.Dir, "data", node)
}

func (l *Launcher) outsideDir() string {
	sum := sha256.Sum256([]byte(l.Dir))
	return filepath.Join(os.TempDir(), "dlock-"+hex.EncodeToString(sum[:6]))
}

// EndpointsFile is the path of the dotenv file Up writes.
func (l *Launcher) EndpointsFile() string { return filepath.Join(l.Dir, "endpoints.env") }

func (l *Launcher) logf(format string, a ...any) { fmt.Fprintf(l.out(), format+"\n", a...) }

// recordOf returns the node's record, or nil if it has none.
func (l *Launcher) recordOf(node string) *record {
	r, err := l.readRecord(node)
	if err != nil {
		return nil
	}
	return r
}

func (r *record) state() procState { return stateOf(r.PID, r.Start) }

// isUp reports whether Up completed for the topology since the last Down.
func (l *Launcher) isUp(topo string) bool {
	_, err := os.Stat(l.upMarker(topo))
	return err == nil
}

func (l *Launcher) readyTimeout() time.Duration {
	if l.ReadyTimeout > 0 {
		return l.ReadyTimeout
	}
	return 2 * time.Minute
}

func (l *Launcher) out() io.Writer {
	if l.Out == nil {
		return io.Discard
	}
	return l.Out
}

func (l *Launcher) readRecord(node string) (*record, error) {
	b, err := os.ReadFile(l.recordPath(node))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", l.recordPath(node), err)
	}
	return &r, nil
}

func (l *Launcher) writeRecord(r *record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := l.recordPath(r.Node) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, l.recordPath(r.Node))
}

// records returns every node record in the state directory, including those
// of nodes this launcher's topologies do not know.
func (l *Launcher) records() ([]*record, error) {
	paths, err := filepath.Glob(filepath.Join(l.runDir(), "*.json"))
	if err != nil {
		return nil, err
	}
	var rs []*record
	for _, p := range paths {
		r, err := l.readRecord(strings.TrimSuffix(filepath.Base(p), ".json"))
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// lock takes the state directory's file lock; the returned func releases it.
func (l *Launcher) lock(ctx context.Context) (func(), error) {
	for _, d := range []string{l.runDir(), filepath.Join(l.Dir, "data"), filepath.Join(l.Dir, "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(filepath.Join(l.Dir, "launcher.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the launcher lock: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// resolve returns the topologies named, all of them when names is empty.
func (l *Launcher) resolve(names []string) ([]topology.Topology, error) {
	if len(names) == 0 {
		return l.Topologies, nil
	}
	var ts []topology.Topology
	for _, name := range names {
		t, ok := topology.Lookup(l.Topologies, name)
		if !ok {
			return nil, fmt.Errorf("unknown topology %q (known: %s)", name, strings.Join(topology.Names(l.Topologies), ", "))
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func (l *Launcher) node(name string) (topology.Topology, topology.Node, error) {
	t, n, ok := topology.FindNode(l.Topologies, name)
	if !ok {
		return t, n, fmt.Errorf("unknown node %q", name)
	}
	return t, n, nil
}

// Option changes how nodes are started.
type Option func(*options)

type options struct {
	aof *bool
}

// AOF starts Redis nodes with appendonly yes and appendfsync always (on) or
// with no persistence at all (off, the default). A node restarted without
// this option keeps the setting it had.
func AOF(on bool) Option { return func(o *options) { o.aof = &on } }

// begin applies opts and takes the state lock.
func (l *Launcher) begin(ctx context.Context, opts []Option) (options, func(), error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	unlock, err := l.lock(ctx)
	return o, unlock, err
}

// Up starts the named topologies (all when none are named), waits until
// every node is ready and clusters are formed, and writes the endpoints
// file. Nodes already running are left alone, so Up is idempotent. If a port
// is taken by another process nothing is started. After a failed Up, Down
// removes whatever was started.
func (l *Launcher) Up(ctx context.Context, topologies []string, opts ...Option) error {
	ts, err := l.resolve(topologies)
	if err != nil {
		return err
	}
	o, unlock, err := l.begin(ctx, opts)
	if err != nil {
		return err
	}
	defer unlock()

	// Check every port of every node to start before starting any.
	toStart := make([][]topology.Node, len(ts))
	for i, t := range ts {
		for _, n := range t.Nodes {
			if r := l.recordOf(n.Name); r != nil && r.state() != procGone {
				continue
			}
			if err := checkPorts(n); err != nil {
				return err
			}
			toStart[i] = append(toStart[i], n)
		}
	}

	// Start and wait for the topologies in parallel. A topology's
	// start-to-ready time runs from the launch of its first node until it
	// is ready and formed.
	errs := make([]error, len(ts))
	took := make([]time.Duration, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			for j, n := range toStart[i] {
				if errs[i] = l.start(ctx, t, n, o); errs[i] != nil {
					return
				}
				if port, ok := t.StartGate(n); ok && j < len(toStart[i])-1 {
					if errs[i] = l.waitListening(ctx, n, port); errs[i] != nil {
						return
					}
				}
			}
			if errs[i] = l.bringUp(ctx, t); errs[i] == nil && len(toStart[i]) > 0 {
				took[i] = time.Since(began)
			}
		}()
	}
	wg.Wait()
	for i, t := range ts {
		if errs[i] != nil {
			continue
		}
		if err := os.WriteFile(l.upMarker(t.Name), nil, 0o644); err != nil {
			return err
		}
		if took[i] > 0 {
			l.logf("%-14s ready in %5.2fs  %s=%s", t.Name, took[i].Seconds(), t.EnvVar, t.URL())
		} else {
			l.logf("%-14s already up     %s=%s", t.Name, t.EnvVar, t.URL())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w\n(run `dlockenv down` to remove what was started)", err)
	}
	return l.writeEndpoints()
}

// bringUp waits until every node of t is ready, then forms the cluster if
// t needs it.
func (l *Launcher) bringUp(ctx context.Context, t topology.Topology) error {
	errs := make([]error, len(t.Nodes))
	var wg sync.WaitGroup
	for i, n := range t.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.waitReady(ctx, t, n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return l.formCluster(ctx, t)
}

// start launches node n of t (which must not be running) and records it.
func (l *Launcher) start(ctx context.Context, t topology.Topology, n topology.Node, o options) error {
	aof := false
	if prev := l.recordOf(n.Name); prev != nil {
		aof = prev.AOF
	}
	if o.aof != nil {
		aof = *o.aof
	}
	dir := l.dataDir(t.Kind, n.Name)
	fresh := false
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		fresh = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	program, args, files := nativeCommand(t, n, dir, aof)
	path, err := lookPath(program)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if _, routed := files[hostsFileName]; routed {
		if path, args, err = withHosts(path, args, filepath.Join(dir, hostsFileName)); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if fresh {
		flags |= os.O_TRUNC
	}
	logf, err := os.OpenFile(l.logPath(n.Name), flags, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s dlockenv: starting %s\n", time.Now().Format(time.RFC3339), n.Name)

	var cred *syscall.Credential
	if prepare := kindOf(t.Kind).prepare; prepare != nil {
		if cred, err = prepare(l, ctx, dir, fresh, logf); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	pid, start, err := spawn(path, args, dir, logf, cred)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	if err := l.writeRecord(&record{
		Node: n.Name, Topology: t.Name, Kind: t.Kind,
		PID: pid, Start: start, Argv: append([]string{path}, args...), AOF: aof,
	}); err != nil {
		return err
	}
	if l.Started != nil {
		l.Started(n.Name, pid)
	}
	return nil
}

// Down ends every node recorded in the state directory (whatever started
// it: a full Up, a failed one, or Start), then removes their records, data
// and the endpoints file. Logs are kept in .dlock/log for inspection.
func (l *Launcher) Down(ctx context.Context) error {
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	rs, err := l.records()
	if err != nil {
		return err
	}
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			// The data goes too, so only a kind with a stop signal
			// (PostgreSQL, whose backends outlive a killed postmaster)
			// is worth a graceful stop; an etcd leader would spend
			// seconds handing over leadership to members that are going
			// away too.
			stop := killProcess
			if kindOf(r.Kind).stopSignal != 0 {
				stop = stopProcess
			}
			if err := stop(r); err != nil {
				errs[i] = fmt.Errorf("%s: %w", r.Node, err)
				return
			}
			l.logf("stopped %-16s in %.2fs", r.Node, time.Since(t0).Seconds())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, d := range []string{l.runDir(), filepath.Join(l.Dir, "data"), l.outsideDir()} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if err := os.Remove(l.EndpointsFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// stopProcess ends a recorded process gracefully (SIGTERM, or its kind's
// stop signal: SIGINT, fast shutdown, for PostgreSQL), continuing it in
// case it is paused, and kills it if it has not exited after 15 s.
func stopProcess(r *record) error {
	sig := syscall.SIGTERM
	if s := kindOf(r.Kind).stopSignal; s != 0 {
		sig = s
	}
	if err := signal(r.PID, r.Start, sig); err != nil {
		if errors.Is(err, errGone) {
			return nil
		}
		return err
	}
	_ = signal(r.PID, r.Start, syscall.SIGCONT)
	if waitState(r.PID, r.Start, procGone, 15*time.Second) {
		return nil
	}
	return killProcess(r)
}

func killProcess(r *record) error {
	if err := signal(r.PID, r.Start, syscall.SIGKILL); err != nil {
		if errors.Is(err, errGone) {
			return nil
		}
		return err
	}
	if !waitState(r.PID, r.Start, procGone, 10*time.Second) {
		return fmt.Errorf("pid %d still exists 10s after SIGKILL", r.PID)
	}
	return nil
}

// NodeStatus describes one node.
type NodeStatus struct {
	Node     string
	Topology string
	Addr     string // client address, host:port
	PID      int    // 0 if never started
	State    string // "running", "paused", "exited" or "not started"
	AOF      bool
}

// Status reports every node of every topology, and any other node recorded
// in the state directory.
func (l *Launcher) Status(ctx context.Context) ([]NodeStatus, error) {
	var st []NodeStatus
	known := map[string]bool{}
	for _, t := range l.Topologies {
		for _, n := range t.Nodes {
			known[n.Name] = true
			s := NodeStatus{Node: n.Name, Topology: t.Name, Addr: n.Addr(), State: "not started"}
			if r := l.recordOf(n.Name); r != nil {
				s.PID, s.State, s.AOF = r.PID, r.state().String(), r.AOF
			}
			st = append(st, s)
		}
	}
	rs, err := l.records()
	if err != nil {
		return nil, err
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Node < rs[j].Node })
	for _, r := range rs {
		if !known[r.Node] {
			st = append(st, NodeStatus{Node: r.Node, Topology: r.Topology, PID: r.PID, State: r.state().String(), AOF: r.AOF})
		}
	}
	return st, nil
}

// Start starts one stopped or killed node again, with its data directory
// and options as before unless opts change them, and waits until it is
// ready (for a cluster member: serving as part of the cluster). Starting a
// running node does nothing; starting a paused one is an error.
func (l *Launcher) Start(ctx context.Context, node string, opts ...Option) error {
	t, n, err := l.node(node)
	if err != nil {
		return err
	}
	o, unlock, err := l.begin(ctx, opts)
	if err != nil {
		return err
	}
	defer unlock()
	if r := l.recordOf(n.Name); r != nil {
		switch r.state() {
		case procRunning:
			if o.aof != nil && *o.aof != r.AOF {
				return fmt.Errorf("%s is running with aof=%v: stop it first to change that", n.Name, r.AOF)
			}
			return nil
		case procPaused:
			return fmt.Errorf("%s is paused: resume it instead", n.Name)
		}
	}
	if err := checkPorts(n); err != nil {
		return err
	}
	if err := l.start(ctx, t, n, o); err != nil {
		return err
	}
	if err := l.waitReady(ctx, t, n); err != nil {
		return err
	}
	if l.isUp(t.Name) {
		return l.waitMember(ctx, t, n)
	}
	return nil
}

// Stop stops one node gracefully (SIGTERM, then SIGKILL after 15 s) and
// waits until it has exited. Its data directory is kept for Start. Stopping
// a node that is not running does nothing.
func (l *Launcher) Stop(ctx context.Context, node string) error {
	return l.control(ctx, node, func(r *record) error { return stopProcess(r) })
}

// Kill sends SIGKILL to one node and waits until it has exited. Killing a
// node that is not running does nothing.
func (l *Launcher) Kill(ctx context.Context, node string) error {
	return l.control(ctx, node, func(r *record) error { return killProcess(r) })
}

// Pause freezes one node with SIGSTOP: its sockets stay open but it answers
// nothing until Resume.
func (l *Launcher) Pause(ctx context.Context, node string) error {
	return l.control(ctx, node, func(r *record) error { return signalAndWait(r, syscall.SIGSTOP, procPaused) })
}

// Resume continues a paused node with SIGCONT.
func (l *Launcher) Resume(ctx context.Context, node string) error {
	return l.control(ctx, node, func(r *record) error { return signalAndWait(r, syscall.SIGCONT, procRunning) })
}

// signalAndWait sends sig and waits until the process reaches want.
func signalAndWait(r *record, sig syscall.Signal, want procState) error {
	if err := signal(r.PID, r.Start, sig); err != nil {
		return err
	}
	if !waitState(r.PID, r.Start, want, 5*time.Second) {
		return fmt.Errorf("pid %d is not %v 5s after %v", r.PID, want, sig)
	}
	return nil
}

func (l *Launcher) control(ctx context.Context, node string, do func(*record) error) error {
	_, n, err := l.node(node)
	if err != nil {
		return err
	}
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	r, err := l.readRecord(n.Name)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s was not started by this launcher (state in %s)", n.Name, l.Dir)
	}
	if err != nil {
		return err
	}
	if err := do(r); err != nil {
		if errors.Is(err, errGone) {
			return fmt.Errorf("%s (pid %d): %w", n.Name, r.PID, err)
		}
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	return nil
}

// Addr returns the client address (host:port) of the named node.
func (l *Launcher) Addr(node string) (string, error) {
	_, n, err := l.node(node)
	if err != nil {
		return "", err
	}
	return n.Addr(), nil
}

// Nodes returns the node names of the named topology.
func (l *Launcher) Nodes(topo string) ([]string, error) {
	ts, err := l.resolve([]string{topo})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range ts[0].Nodes {
		names = append(names, n.Name)
	}
	return names, nil
}

// Endpoints returns the URL variables of the topologies that are up.
func (l *Launcher) Endpoints() map[string]string {
	env := map[string]string{}
	for _, t := range l.Topologies {
		if l.isUp(t.Name) {
			env[t.EnvVar] = t.URL()
		}
	}
	return env
}

// EndpointsEnv renders Endpoints as a dotenv file, in topology order.
func (l *Launcher) EndpointsEnv() string {
	var b strings.Builder
	b.WriteString("# Endpoints of the dlock test servers that are up; written by dlockenv.\n")
	fmt.Fprintf(&b, "# Load with: set -a; . %s; set +a\n", l.EndpointsFile())
	env := l.Endpoints()
	for _, t := range l.Topologies {
		if v, ok := env[t.EnvVar]; ok {
			fmt.Fprintf(&b, "%s=%s\n", t.EnvVar, v)
		}
	}
	return b.String()
}

func (l *Launcher) writeEndpoints() error {
	tmp := l.EndpointsFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(l.EndpointsEnv()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, l.EndpointsFile())
}
