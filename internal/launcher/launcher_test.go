package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/internal/topology"
)

// These tests start their own servers on ports the kernel hands out, with
// their own state directory, so they never disturb the servers `make up`
// started (which other packages' tests use at the same time).

// needServers skips the test unless the programs are installed; when the
// backend behind envVar is required (DLOCK_REQUIRE_BACKENDS), it fails
// instead.
func needServers(t *testing.T, envVar string, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := lookPath(p); err != nil {
			if testenv.Required(envVar) {
				t.Fatalf("%v (%s requires this backend)", err, testenv.RequireVar)
			}
			t.Skip(err)
		}
	}
}

// private returns a topology like the standard one named like, on free
// ports, with count nodes (the first count of like's).
func private(t *testing.T, like, name string, count int) topology.Topology {
	t.Helper()
	base, ok := topology.Lookup(topology.All(), like)
	if !ok {
		t.Fatalf("no topology %s", like)
	}
	base.Nodes = base.Nodes[:count]
	tp, err := Private(base, name)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func newLauncher(t *testing.T, ts ...topology.Topology) *Launcher {
	t.Helper()
	l, err := New(t.TempDir(), ts)
	if err != nil {
		t.Fatal(err)
	}
	l.Out = testWriter{t}
	l.ReadyTimeout = time.Minute
	t.Cleanup(func() {
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return l
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func ping(addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reply, err := RedisDo(ctx, addr, "PING")
	if err == nil && reply != "PONG" {
		err = fmt.Errorf("PING: %q", reply)
	}
	return err
}

// noServer returns nil if nothing answers at addr: the connection is
// refused, or reset (a connection made while the kernel still tears a dead
// process's listening socket down is accepted and then reset).
func noServer(addr string) error {
	err := ping(addr, time.Second)
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	return fmt.Errorf("PING: %v, want connection refused (or reset)", err)
}

func pidOf(t *testing.T, l *Launcher, node string) int {
	t.Helper()
	r, err := l.readRecord(node)
	if err != nil {
		t.Fatal(err)
	}
	return r.PID
}

func stateIs(t *testing.T, l *Launcher, node, want string) {
	t.Helper()
	st, err := l.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Node == node {
			if s.State != want {
				t.Errorf("%s is %s, want %s", node, s.State, want)
			}
			return
		}
	}
	t.Errorf("no status for %s", node)
}

// TestNodeControl drives a redlock-like set of Redis masters through every
// node operation and checks each against the server itself.
func TestNodeControl(t *testing.T) {
	needServers(t, "DLOCK_REDLOCK_URL", topology.RedisServer)
	ctx := context.Background()
	tp := private(t, "redlock", "ctlredlock", 2)
	l := newLauncher(t, tp)
	node, addr := tp.Nodes[0].Name, tp.Nodes[0].Addr()

	if err := l.Up(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range tp.Nodes {
		if err := ping(n.Addr(), time.Second); err != nil {
			t.Fatalf("%s after Up: %v", n.Name, err)
		}
	}
	env, err := os.ReadFile(l.EndpointsFile())
	if err != nil || !strings.Contains(string(env), tp.EnvVar+"="+tp.URL()+"\n") {
		t.Errorf("endpoints file lacks %s=%s: %q %v", tp.EnvVar, tp.URL(), env, err)
	}

	// Up again starts nothing new.
	pids := []int{pidOf(t, l, tp.Nodes[0].Name), pidOf(t, l, tp.Nodes[1].Name)}
	if err := l.Up(ctx, []string{tp.Name}); err != nil {
		t.Fatal(err)
	}
	for i, n := range tp.Nodes {
		if got := pidOf(t, l, n.Name); got != pids[i] {
			t.Errorf("second Up restarted %s: pid %d, was %d", n.Name, got, pids[i])
		}
	}

	if err := l.Pause(ctx, node); err != nil {
		t.Fatal(err)
	}
	stateIs(t, l, node, "paused")
	var ne net.Error
	if err := ping(addr, 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("PING to a paused node: %v, want a timeout", err)
	}
	if err := l.Resume(ctx, node); err != nil {
		t.Fatal(err)
	}
	stateIs(t, l, node, "running")
	if err := ping(addr, 2*time.Second); err != nil {
		t.Errorf("PING after Resume: %v", err)
	}

	if err := l.Kill(ctx, node); err != nil {
		t.Fatal(err)
	}
	stateIs(t, l, node, "exited")
	if err := noServer(addr); err != nil {
		t.Errorf("PING to a killed node: %v", err)
	}
	if err := l.Kill(ctx, node); err != nil {
		t.Errorf("killing a dead node again: %v", err)
	}
	if err := l.Pause(ctx, node); err == nil {
		t.Error("pausing a dead node succeeded")
	}
	if err := l.Start(ctx, node); err != nil {
		t.Fatal(err)
	}
	stateIs(t, l, node, "running")
	if err := ping(addr, time.Second); err != nil {
		t.Errorf("PING after Start: %v", err)
	}
	if pidOf(t, l, node) == pids[0] {
		t.Error("Start reused the old pid")
	}

	// A graceful stop, then a restart with AOF.
	if err := l.Stop(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := noServer(addr); err != nil {
		t.Errorf("PING to a stopped node: %v", err)
	}
	if err := l.Start(ctx, node, AOF(true)); err != nil {
		t.Fatal(err)
	}
	info, err := RedisDo(ctx, addr, "INFO", "persistence")
	if err != nil || !strings.Contains(info, "aof_enabled:1") {
		t.Errorf("after Start(AOF(true)): aof not enabled: %v", err)
	}
	if err := l.Start(ctx, node, AOF(false)); err == nil {
		t.Error("changing AOF of a running node succeeded")
	}

	// The other node was never touched.
	if got := pidOf(t, l, tp.Nodes[1].Name); got != pids[1] {
		t.Errorf("%s was restarted", tp.Nodes[1].Name)
	}

	if err := l.Down(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range tp.Nodes {
		if err := noServer(n.Addr()); err != nil {
			t.Errorf("%s after Down: %v", n.Name, err)
		}
		stateIs(t, l, n.Name, "not started")
	}
	if _, err := os.Stat(l.EndpointsFile()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("endpoints file still there after Down: %v", err)
	}
}

// TestPortTaken checks that a port held by another process stops Up before
// anything starts, with an error naming the port.
func TestPortTaken(t *testing.T) {
	needServers(t, "DLOCK_REDIS_URL", topology.RedisServer)
	tp := private(t, "redlock", "taken", 2)
	ln, err := net.Listen("tcp", tp.Nodes[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := newLauncher(t, tp)
	err = l.Up(context.Background(), nil)
	port := strconv.Itoa(tp.Nodes[1].Port(topology.Client))
	if err == nil || !strings.Contains(err.Error(), "port "+port) || !strings.Contains(err.Error(), tp.Nodes[1].Name) {
		t.Fatalf("Up with port %s taken: %v", port, err)
	}
	stateIs(t, l, tp.Nodes[0].Name, "not started")
}

// TestDownAfterFailedUp makes the second node fail to start and checks that
// Up reports it and Down still removes the first.
func TestDownAfterFailedUp(t *testing.T) {
	needServers(t, "DLOCK_REDIS_URL", topology.RedisServer)
	tp := private(t, "redlock", "failing", 2)
	tp.Nodes[1].Args = []string{"--no-such-directive", "yes"}
	l := newLauncher(t, tp)
	err := l.Up(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), tp.Nodes[1].Name+" exited") {
		t.Fatalf("Up with a bad node: %v", err)
	}
	first := l.recordOf(tp.Nodes[0].Name)
	if first == nil || first.state() != procRunning {
		t.Fatalf("first node not running after the failed Up: %+v", first)
	}
	if err := l.Down(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := first.state(); s != procGone {
		t.Errorf("first node is %v after Down", s)
	}
	if err := noServer(tp.Nodes[0].Addr()); err != nil {
		t.Errorf("first node after Down: %v", err)
	}
}

// TestRecycledPID checks that a process whose start time does not match
// the record is never signalled.
func TestRecycledPID(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	_, start, err := procStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stale := &record{Node: "stale", PID: cmd.Process.Pid, Start: start - 1}
	if s := stale.state(); s != procGone {
		t.Errorf("state of a recycled pid = %v, want exited", s)
	}
	if err := killProcess(stale); err != nil {
		t.Fatal(err)
	}
	if err := signal(stale.PID, stale.Start, syscall.SIGKILL); !errors.Is(err, errGone) {
		t.Errorf("signal to a recycled pid: %v, want errGone", err)
	}
	if s := stateOf(cmd.Process.Pid, start); s != procRunning {
		t.Errorf("the unrelated process is %v, want running", s)
	}
}

// TestLeader finds the leader of private etcd and ZooKeeper clusters, kills
// it, and finds the new one.
func TestLeader(t *testing.T) {
	for _, c := range []struct{ like, envVar, program string }{
		{"etcd3", "DLOCK_ETCD3_URL", topology.EtcdServer},
		{"zookeeper3", "DLOCK_ZK3_URL", "java"},
	} {
		t.Run(c.like, func(t *testing.T) {
			needServers(t, c.envVar, c.program)
			ctx := context.Background()
			tp := private(t, c.like, "lead"+c.like, 3)
			l := newLauncher(t, tp)
			if err := l.Up(ctx, nil); err != nil {
				t.Fatal(err)
			}
			leader, err := l.Leader(ctx, tp.Name)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Kill(ctx, leader); err != nil {
				t.Fatal(err)
			}
			next, err := l.Leader(ctx, tp.Name)
			if err != nil {
				t.Fatal(err)
			}
			if next == leader {
				t.Errorf("leader %s was killed but is still reported", leader)
			}
			if err := l.Start(ctx, leader); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDefaultMatchesEndpoints checks, without disturbing them, that the
// servers `make up` started are the ones the endpoint variables name and
// that the package-level functions find them.
func TestDefaultMatchesEndpoints(t *testing.T) {
	url := testenv.Endpoint(t, "DLOCK_REDLOCK_URL")
	l, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := topology.Lookup(l.Topologies, "redlock")
	if tp.URL() != url {
		if testenv.Required("DLOCK_REDLOCK_URL") {
			t.Fatalf("DLOCK_REDLOCK_URL=%s but the launcher's redlock is %s", url, tp.URL())
		}
		t.Skipf("DLOCK_REDLOCK_URL=%s names servers the launcher did not start", url)
	}
	nodes, err := Nodes("redlock")
	if err != nil || len(nodes) != 5 {
		t.Fatalf("Nodes(redlock) = %v, %v", nodes, err)
	}
	for _, n := range nodes {
		stateIs(t, l, n, "running")
		addr, err := Addr(n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(url, addr) {
			t.Errorf("%s at %s is not in %s", n, addr, url)
		}
		if err := ping(addr, 2*time.Second); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// TestLogTailDropsStackFrames checks that a failure's log tail shows a
// JVM's messages rather than the frames of its repeated stack traces.
func TestLogTailDropsStackFrames(t *testing.T) {
	l := &Launcher{Dir: t.TempDir()}
	var log strings.Builder
	for i := range 20 {
		fmt.Fprintf(&log, "WARN message %d\njava.net.ConnectException: Connection refused\n", i)
		log.WriteString("\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)\n\tat java.base/java.lang.Thread.run(Thread.java:840)\n\t... 3 more\n")
	}
	if err := os.MkdirAll(filepath.Dir(l.logPath("n1")), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.logPath("n1"), []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tail := l.logTail("n1")
	if strings.Contains(tail, "\tat ") || strings.Contains(tail, "... 3 more") {
		t.Errorf("tail holds stack frames:%s", tail)
	}
	for _, want := range []string{"WARN message 19\n", "WARN message 13\n", "Connection refused"} {
		if !strings.Contains(tail, want) {
			t.Errorf("tail lacks %q:%s", want, tail)
		}
	}
}
