package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"

	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/topology"
)

// Routes are the proxies on the peer routes of a PeerRouted cluster (see
// topology.PeerName): one for each ordered pair of nodes and each port of
// the destination it reaches (topology.RoutePorts), so that cutting the
// routes of one node partitions it from its peers, both ways, while the
// others still talk.
type Routes struct {
	links map[[2]string]*Link // by (from, to) node name
	late  []*toxiproxy.Proxy  // not listening until Rejoin (topology.LateRoute)
}

// Route starts the proxies on every peer route of tp. It must run before the
// cluster starts: until then the nodes cannot reach each other.
func (p *Proxies) Route(tp topology.Topology) (*Routes, error) {
	if !tp.PeerRouted {
		return nil, fmt.Errorf("topology %s is not peer-routed", tp.Name)
	}
	r := &Routes{links: map[[2]string]*Link{}}
	for _, from := range tp.Nodes {
		for _, to := range tp.Nodes {
			if from.Name == to.Name {
				continue
			}
			link := &Link{}
			for _, port := range tp.RoutePorts(from, to) {
				num := strconv.Itoa(to.Port(port))
				listen, upstream := net.JoinHostPort(topology.RouteAddr(from, to), num), net.JoinHostPort(topology.Host, num)
				if tp.LateRoute(from, to, port) {
					px := p.create(listen, upstream)
					r.late = append(r.late, px)
					link.proxies = append(link.proxies, px)
					continue
				}
				px, err := p.start(listen, upstream)
				if err != nil {
					return nil, err
				}
				link.proxies = append(link.proxies, px)
			}
			r.links[[2]string{from.Name, to.Name}] = link
		}
	}
	return r, nil
}

// Rejoin opens the late routes (topology.LateRoute), once a partition has
// healed, so that a cut-off ZooKeeper server can announce itself again.
func (r *Routes) Rejoin() error {
	for _, px := range r.late {
		if err := px.Start(); err != nil {
			return err
		}
	}
	r.late = nil
	return nil
}

// Isolate returns the link made of every route to and from node: cutting
// it partitions node from all of its peers. Clients still reach every node.
func (r *Routes) Isolate(node string) (*Link, error) {
	all := &Link{}
	for pair, l := range r.links {
		if pair[0] == node || pair[1] == node {
			all.proxies = append(all.proxies, l.proxies...)
		}
	}
	if len(all.proxies) == 0 {
		return nil, fmt.Errorf("no peer routes of node %q", node)
	}
	return all, nil
}

// Cluster is a private, peer-routed copy of a cluster topology, run by a
// launcher of its own so that faults on it never touch the shared servers.
type Cluster struct {
	L      *launcher.Launcher
	T      topology.Topology
	Routes *Routes
}

// StartCluster starts a private copy of the named cluster topology (etcd3
// or zookeeper3) on free ports, its peers talking through routes of p, and
// stops it when t ends. Each setup function sees the launcher before the
// cluster starts.
func StartCluster(t testing.TB, p *Proxies, base string, setup ...func(*launcher.Launcher)) *Cluster {
	t.Helper()
	bt, ok := topology.Lookup(topology.All(), base)
	if !ok {
		t.Fatalf("no topology %s", base)
	}
	tp, err := launcher.Private(bt, fmt.Sprintf("routed%d", rand.IntN(1_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	tp.PeerRouted = true
	routes, err := p.Route(tp)
	if err != nil {
		t.Fatal(err)
	}
	l, err := launcher.New(t.TempDir(), []topology.Topology{tp})
	if err != nil {
		t.Fatal(err)
	}
	l.ReadyTimeout = 2 * time.Minute
	for _, f := range setup {
		f(l)
	}
	t.Cleanup(func() {
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("stopping %s: %v", tp.Name, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := l.Up(ctx, []string{tp.Name}); err != nil {
		t.Fatalf("starting %s: %v", tp.Name, err)
	}
	return &Cluster{L: l, T: tp, Routes: routes}
}

// CutLeader cuts the current leader off from its peers, every route to and
// from it, and returns its name and the cut link; Heal (or t's cleanup)
// ends the partition. A cluster is partitioned once (see
// topology.LateRoute).
func (c *Cluster) CutLeader(ctx context.Context, t testing.TB) (string, *Link) {
	t.Helper()
	leader, err := c.L.Leader(ctx, c.T.Name)
	if err != nil {
		t.Fatal(err)
	}
	link, err := c.Routes.Isolate(leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Heal(link) })
	if err := link.Cut(); err != nil {
		t.Fatal(err)
	}
	return leader, link
}

// Heal ends a partition made with CutLeader, and opens the late routes so
// that the cut-off node can rejoin.
func (c *Cluster) Heal(link *Link) error {
	link.Heal()
	return c.Routes.Rejoin()
}

// NewLeader waits until a node other than old reports itself leader (an
// isolated leader may claim it for a while: Leader returns the first
// claimant in node order, so every node is asked in turn).
func (c *Cluster) NewLeader(ctx context.Context, old string) (string, error) {
	for {
		for _, n := range c.T.Nodes {
			if n.Name == old {
				continue
			}
			if ok, err := c.L.IsLeader(ctx, n.Name); err == nil && ok {
				return n.Name, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no node but %s became leader of %s: %w", old, c.T.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
