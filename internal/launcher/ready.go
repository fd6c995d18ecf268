package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/topology"
)

// probeTimeout bounds one readiness probe.
const probeTimeout = 2 * time.Second

// waitReady polls node n until it serves clients, failing early, with the
// end of its log, if its process exits.
func (l *Launcher) waitReady(ctx context.Context, t topology.Topology, n topology.Node) error {
	return l.await(ctx, n, "ready", func(ctx context.Context) error { return probe(ctx, t, n) })
}

// await polls check until it succeeds, for at most the ready timeout,
// failing early, with the end of node n's log, if its process exits; what
// names the state awaited in the error.
func (l *Launcher) await(ctx context.Context, n topology.Node, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.readyTimeout())
	defer cancel()
	var last error
	for {
		r := l.recordOf(n.Name)
		if r == nil || r.state() == procGone {
			return fmt.Errorf("%s exited while starting%s", n.Name, l.logTail(n.Name))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not %s after %v: %v%s", n.Name, what, l.readyTimeout(), last, l.logTail(n.Name))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probe checks once that node n answers as a server of its kind.
func probe(ctx context.Context, t topology.Topology, n topology.Node) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return kindOf(t.Kind).probe(ctx, t, n)
}

func probeRedis(ctx context.Context, t topology.Topology, n topology.Node) error {
	reply, err := RedisDo(ctx, n.Addr(), "PING")
	if err == nil && reply != "PONG" {
		err = fmt.Errorf("PING answered %q", reply)
	}
	return err
}

func probeEtcd(ctx context.Context, t topology.Topology, n topology.Node) error {
	var h struct{ Health string }
	if err := httpJSON(ctx, "GET", "http://"+n.Addr()+"/health", &h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("etcd /health says %q", h.Health)
	}
	return nil
}

func probeZooKeeper(ctx context.Context, t topology.Topology, n topology.Node) error {
	mode, err := zkMode(ctx, n.Addr())
	if err == nil && t.Cluster && mode != "leader" && mode != "follower" {
		err = fmt.Errorf("ZooKeeper mode %q", mode)
	}
	return err
}

func probeConsul(ctx context.Context, t topology.Topology, n topology.Node) error {
	var leader string
	if err := httpJSON(ctx, "GET", "http://"+n.Addr()+"/v1/status/leader", &leader); err != nil {
		return err
	}
	if leader == "" {
		return errors.New("consul has no leader yet")
	}
	return nil
}

func probePostgres(ctx context.Context, t topology.Topology, n topology.Node) error {
	path, err := lookPath("pg_isready")
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, path, "-h", topology.Host, "-p", strconv.Itoa(n.Port(topology.Client)),
		"-U", topology.PostgresUser, "-d", topology.PostgresDB, "-t", "2").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_isready: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// formCluster does what a topology needs once all its nodes are ready
// (the kind's form step, if it has one).
func (l *Launcher) formCluster(ctx context.Context, t topology.Topology) error {
	if form := kindOf(t.Kind).form; form != nil {
		return form(l, ctx, t)
	}
	return nil
}

// formRedis creates a Redis Cluster (unless it already exists) and waits
// until every node reports cluster_state:ok, or waits until every Sentinel
// knows the primary, its replica and the other Sentinels.
func (l *Launcher) formRedis(ctx context.Context, t topology.Topology) error {
	switch {
	case t.Sentinel:
		for _, n := range t.Nodes {
			if !t.IsSentinel(n) {
				continue
			}
			err := l.await(ctx, n, "monitoring", func(ctx context.Context) error {
				return sentinelReady(ctx, n.Addr(), len(t.Nodes)-2)
			})
			if err != nil {
				return err
			}
		}
	case t.Cluster:
		formed, err := redisClusterFormed(ctx, t)
		if err != nil {
			return err
		}
		if !formed {
			path, err := lookPath("redis-cli")
			if err != nil {
				return err
			}
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			out, err := exec.CommandContext(cctx, path, t.InitArgs()...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: redis-cli --cluster create: %v\n%s", t.Name, err, out)
			}
		}
		for _, n := range t.Nodes {
			if err := l.redisMember(ctx, t, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// formPostgres checks that the PostgreSQL URL accepts a query.
func (l *Launcher) formPostgres(ctx context.Context, t topology.Topology) error {
	path, err := lookPath("psql")
	if err != nil {
		return nil // pg_isready already answered; psql is only a further check
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, path, t.URL(), "-Atc", "select 1")
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=5")
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "1" {
		return fmt.Errorf("%s: psql %s: %v: %s", t.Name, t.URL(), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sentinelReady checks once that the Sentinel at addr sees the primary up,
// one replica and the given number of Sentinels (itself included).
func sentinelReady(ctx context.Context, addr string, sentinels int) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	s, err := RedisDo(ctx, addr, "INFO", "sentinel")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(s, "\n") {
		if _, v, ok := strings.Cut(strings.TrimSpace(line), "master0:"); ok {
			want := []string{"name=" + topology.SentinelMaster, "status=ok", "slaves=1", "sentinels=" + strconv.Itoa(sentinels)}
			for _, w := range want {
				if !slices.Contains(strings.Split(v, ","), w) {
					return fmt.Errorf("sentinel sees %s; want %v", v, want)
				}
			}
			return nil
		}
	}
	return errors.New("sentinel monitors no primary")
}

// redisClusterFormed reports whether t's nodes already form a cluster, and
// fails if they are half-formed (some nodes know others, or own slots).
func redisClusterFormed(ctx context.Context, t topology.Topology) (bool, error) {
	fresh := 0
	for _, n := range t.Nodes {
		info, err := redisClusterInfo(ctx, n.Addr())
		if err != nil {
			return false, fmt.Errorf("%s: %w", n.Name, err)
		}
		if info["cluster_known_nodes"] == "1" && info["cluster_slots_assigned"] == "0" {
			fresh++
		} else if info["cluster_known_nodes"] != strconv.Itoa(len(t.Nodes)) {
			return false, fmt.Errorf("%s: cluster half formed (%s known nodes); run `dlockenv down` and try again",
				n.Name, info["cluster_known_nodes"])
		}
	}
	switch fresh {
	case 0:
		return true, nil
	case len(t.Nodes):
		return false, nil
	}
	return false, fmt.Errorf("%s: some nodes are in the cluster and some are not; run `dlockenv down` and try again", t.Name)
}

// waitMember waits until node n serves as a member of its formed topology
// (the kind's member step, if it has one).
func (l *Launcher) waitMember(ctx context.Context, t topology.Topology, n topology.Node) error {
	if member := kindOf(t.Kind).member; member != nil {
		return member(l, ctx, t, n)
	}
	return nil
}

// redisMember waits, for a node of a Redis Cluster, until it reports
// cluster_state:ok. For etcd and ZooKeeper the readiness probe already
// requires a leader.
func (l *Launcher) redisMember(ctx context.Context, t topology.Topology, n topology.Node) error {
	if !t.Cluster {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.readyTimeout())
	defer cancel()
	for {
		info, err := redisClusterInfo(ctx, n.Addr())
		if err == nil && info["cluster_state"] == "ok" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("cluster_state:%s", info["cluster_state"])
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: cluster not ok after %v: %v", n.Name, l.readyTimeout(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func redisClusterInfo(ctx context.Context, addr string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	s, err := RedisDo(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	info := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			info[k] = v
		}
	}
	return info, nil
}

// Leader returns the node that currently leads the named topology: the
// etcd member the others follow, or the ZooKeeper node in leader mode. For a
// single-node topology it is that node. Redis Cluster and Redlock have no
// single leader. While an election is going on (after the leader was killed
// or paused) it keeps asking, until ctx ends or for at most 30 s.
func (l *Launcher) Leader(ctx context.Context, topo string) (string, error) {
	ts, err := l.resolve([]string{topo})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		leader, err := leaderOnce(ctx, ts[0])
		if err == nil || errors.Is(err, errNoSingleLeader) {
			return leader, err
		}
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var errNoSingleLeader = errors.New("has no single leader")

func leaderOnce(ctx context.Context, t topology.Topology) (string, error) {
	if kindOf(t.Kind).isLeader == nil {
		if len(t.Nodes) == 1 {
			return t.Nodes[0].Name, nil
		}
		return "", fmt.Errorf("%s %w", t.Name, errNoSingleLeader)
	}
	var errs []error
	for _, n := range t.Nodes {
		ok, err := isLeader(ctx, t, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
			continue
		}
		if ok {
			return n.Name, nil
		}
	}
	return "", fmt.Errorf("%s: no node reports itself leader: %w", t.Name, errors.Join(errs...))
}

// IsLeader asks one node of an etcd or ZooKeeper topology, once, whether it
// considers itself the leader. A node cut off from its peers may still say
// so for a while after the others have elected another.
func (l *Launcher) IsLeader(ctx context.Context, node string) (bool, error) {
	t, n, err := l.node(node)
	if err != nil {
		return false, err
	}
	if kindOf(t.Kind).isLeader == nil {
		return len(t.Nodes) == 1, nil
	}
	return isLeader(ctx, t, n)
}

func isLeader(ctx context.Context, t topology.Topology, n topology.Node) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return kindOf(t.Kind).isLeader(ctx, n)
}

func etcdIsLeader(ctx context.Context, n topology.Node) (bool, error) {
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
		}
		Leader string
	}
	if err := httpJSON(ctx, "POST", "http://"+n.Addr()+"/v3/maintenance/status", &st); err != nil {
		return false, err
	}
	return st.Leader != "" && st.Leader != "0" && st.Leader == st.Header.MemberID, nil
}

func zooKeeperIsLeader(ctx context.Context, n topology.Node) (bool, error) {
	mode, err := zkMode(ctx, n.Addr())
	if err != nil {
		return false, err
	}
	return mode == "leader" || mode == "standalone", nil
}

// httpJSON does a request with an empty JSON body for POST and decodes the
// JSON reply into v.
func httpJSON(ctx context.Context, method, url string, v any) error {
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, v)
}

// dial connects to addr; the context's deadline bounds the whole exchange.
func dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	return conn, nil
}

// zkMode sends ZooKeeper's srvr four-letter word and returns the Mode line:
// standalone, leader or follower.
func zkMode(ctx context.Context, addr string) (string, error) {
	conn, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	if err != nil && len(b) == 0 {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode: "); ok {
			return mode, nil
		}
	}
	return "", fmt.Errorf("srvr: %q", strings.TrimSpace(string(b)))
}

// RedisDo sends one command to the Redis server at addr over a new
// connection and returns a simple-string, integer or bulk-string reply. An
// error reply is returned as an error. The context's deadline bounds the
// whole exchange.
func RedisDo(ctx context.Context, addr string, args ...string) (string, error) {
	conn, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("unexpected reply %q", line)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// logTail returns the last lines of a node's log, for error messages.
func (l *Launcher) logTail(node string) string {
	b, err := os.ReadFile(l.logPath(node))
	if err != nil || len(b) == 0 {
		return ""
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !stackFrame(line) {
			lines = append(lines, line)
		}
	}
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return fmt.Sprintf("\n--- last lines of %s:\n%s", l.logPath(node), strings.Join(lines, "\n"))
}

// stackFrame reports whether line is a frame of a Java stack trace
// ("\tat ..." or "\t... 3 more"): a JVM's repeated warnings would
// otherwise fill the log tail with frames and hide its messages.
func stackFrame(line string) bool {
	t := strings.TrimLeft(line, " \t")
	return len(t) < len(line) && (strings.HasPrefix(t, "at ") || strings.HasPrefix(t, "... "))
}
