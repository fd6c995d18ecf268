package topology

import (
	"slices"
	"strings"
	"testing"
)

func routed(t *testing.T, name string) Topology {
	t.Helper()
	tp, ok := Lookup(All(), name)
	if !ok {
		t.Fatalf("no topology %s", name)
	}
	tp.PeerRouted = true
	if err := Check([]Topology{tp}); err != nil {
		t.Fatal(err)
	}
	return tp
}

// Every node of a routed etcd cluster is given the same member list (or the
// cluster IDs would differ) while its own hosts file sends each peer name to
// the route from it.
func TestRoutedEtcd(t *testing.T) {
	tp := routed(t, "etcd3")
	n1, n2 := tp.Nodes[0], tp.Nodes[1]
	arg := func(s Server, flag string) string {
		i := slices.Index(s.Args, flag)
		if i < 0 {
			t.Fatalf("no %s in %v", flag, s.Args)
		}
		return s.Args[i+1]
	}
	s1, s2 := tp.Server(n1, Options{DataDir: "/d"}), tp.Server(n2, Options{DataDir: "/d"})
	if a, b := arg(s1, "--initial-cluster"), arg(s2, "--initial-cluster"); a != b || !strings.Contains(a, "etcd3-2=http://etcd3-2.peers.dlock.test:12382") {
		t.Errorf("initial clusters %q and %q", a, b)
	}
	if got := arg(s1, "--listen-peer-urls"); got != "http://127.0.0.1:12381" {
		t.Errorf("listen-peer-urls = %q: a node listens on loopback itself", got)
	}
	if got := arg(s1, "--initial-advertise-peer-urls"); got != "http://etcd3-1.peers.dlock.test:12381" {
		t.Errorf("advertise-peer-urls = %q", got)
	}
	want := "127.0.0.1 localhost\n127.0.0.1 etcd3-1.peers.dlock.test\n" +
		"127.77.1.2 etcd3-2.peers.dlock.test\n127.77.1.3 etcd3-3.peers.dlock.test\n"
	if s1.Hosts != want {
		t.Errorf("hosts of etcd3-1:\n%s\nwant:\n%s", s1.Hosts, want)
	}
	if !strings.Contains(s2.Hosts, "127.77.2.1 etcd3-1.peers.dlock.test\n") {
		t.Errorf("hosts of etcd3-2 route to etcd3-1 elsewhere:\n%s", s2.Hosts)
	}
}

func TestRoutedZooKeeper(t *testing.T) {
	tp := routed(t, "zookeeper3")
	s := tp.Server(tp.Nodes[2], Options{DataDir: "/d"})
	for _, line := range []string{"server.1=zookeeper3-1.peers.dlock.test:2888:3888", "server.3=zookeeper3-3.peers.dlock.test:2890:3890"} {
		if !strings.Contains(s.Files["zoo.cfg"], line+"\n") {
			t.Errorf("zoo.cfg lacks %s:\n%s", line, s.Files["zoo.cfg"])
		}
	}
	if !strings.Contains(s.Hosts, "127.77.3.1 zookeeper3-1.peers.dlock.test\n") {
		t.Errorf("hosts:\n%s", s.Hosts)
	}
	// Election connections only from the higher ID until a heal: no
	// connect-back around the routes.
	n1, n3 := tp.Nodes[0], tp.Nodes[2]
	if got := tp.RoutePorts(n1, n3); !slices.Equal(got, []string{Quorum, Election}) {
		t.Errorf("RoutePorts(1 -> 3) = %v", got)
	}
	if !tp.LateRoute(n1, n3, Election) || tp.LateRoute(n3, n1, Election) || tp.LateRoute(n1, n3, Quorum) {
		t.Error("LateRoute: want only the election route from the lower ID")
	}
	// Each server must listen for elections before the next one starts.
	if port, ok := tp.StartGate(n1); !ok || port != Election {
		t.Errorf("StartGate = %q, %v; want the election port", port, ok)
	}
}

func TestStartGateOnlyRoutedZooKeeper(t *testing.T) {
	for _, name := range []string{"etcd3", "zookeeper3"} {
		tp, _ := Lookup(All(), name)
		if _, ok := tp.StartGate(tp.Nodes[0]); ok {
			t.Errorf("unrouted %s: nodes wait for each other to start", name)
		}
	}
	if _, ok := routed(t, "etcd3").StartGate(routed(t, "etcd3").Nodes[0]); ok {
		t.Error("routed etcd3: nodes wait for each other to start")
	}
}

func TestUnroutedUsesLoopback(t *testing.T) {
	tp, _ := Lookup(All(), "etcd3")
	s := tp.Server(tp.Nodes[0], Options{DataDir: "/d"})
	if s.Hosts != "" || strings.Contains(strings.Join(s.Args, " "), PeerDomain) {
		t.Errorf("an unrouted node uses peer names: %v", s.Args)
	}
}

func TestRoutedRejected(t *testing.T) {
	for _, name := range []string{"redis", "redlock", "consul", "etcd", "zookeeper"} {
		tp, _ := Lookup(All(), name)
		tp.PeerRouted = true
		if err := Check([]Topology{tp}); err == nil || !strings.Contains(err.Error(), "peer-routed") {
			t.Errorf("%s routed: err = %v", name, err)
		}
	}
}
