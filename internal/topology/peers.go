package topology

import (
	"fmt"
	"strings"
)

// Peer routing. A PeerRouted cluster's nodes reach each other by name, and
// each node runs with a hosts file of its own in which the name of every
// other node leads to an address reserved for that ordered pair of peers.
// A fault test listens there with a proxy it can cut, so it can isolate one
// node from the others in both directions while the rest of the cluster
// keeps talking.
//
// A proxy per destination is not enough: etcd members all dial the peer
// URLs of one shared member list, so X's traffic to Y and Z's traffic to Y
// would go through the same proxy. Names resolved differently in each node
// give every pair its own route with one member list.
//
// ZooKeeper needs one more rule. A server that receives an election
// connection from a peer with a lower ID drops it and connects back to the
// address that peer announces, which is the address it listens on: such a
// connection bypasses every route, and a cut leaves election traffic
// flowing (seen on ZooKeeper 3.8: the other two kept electing the cut-off
// leader). So the election routes from a lower ID to a higher one are late
// routes (LateRoute): closed, so that connections are refused, until a
// partition has healed. Until then a lower-ID server never announces
// itself, and every election connection is the higher ID's own, made
// through its route (the one ZooKeeper keeps anyway). After the heal they
// open, because a cut-off server with a lower ID than the new leader can
// only rejoin by announcing itself: the leader never calls a follower
// first. Connections made then may bypass the routes, so a cluster can be
// partitioned once.

// PeerDomain ends every peer name. .test is reserved (RFC 2606): the names
// mean nothing outside the nodes' own hosts files, and nothing outside them
// ever resolves one.
const PeerDomain = "peers.dlock.test"

// PeerName is the name peers use for node n of a PeerRouted topology.
func PeerName(n Node) string { return n.Name + "." + PeerDomain }

// RouteAddr is the loopback address on which node from reaches node to
// (on to's own peer port numbers): 127.77.<from.ID>.<to.ID>. Linux routes
// all of 127.0.0.0/8 to the loopback interface, so nothing is configured.
func RouteAddr(from, to Node) string { return fmt.Sprintf("127.77.%d.%d", from.ID, to.ID) }

// RoutePorts are the port names of node to that node from reaches over its
// route: where the route needs a proxy.
func (t Topology) RoutePorts(from, to Node) []string {
	switch t.Kind {
	case Etcd:
		return []string{Peer}
	case ZooKeeper:
		return []string{Quorum, Election}
	}
	return nil
}

// LateRoute reports whether the route from from to port of to stays closed
// until a partition has healed: a ZooKeeper election port, from a lower ID
// to a higher one (see above).
func (t Topology) LateRoute(from, to Node, port string) bool {
	return t.Kind == ZooKeeper && port == Election && from.ID < to.ID
}

// StartGate reports the port of node n that must accept connections before
// the next node of t starts, if the nodes of t must start in that order: a
// peer-routed ZooKeeper server's election port (see above).
func (t Topology) StartGate(n Node) (port string, ok bool) {
	if t.PeerRouted && t.Kind == ZooKeeper {
		return Election, true
	}
	return "", false
}

// Hosts is the hosts file node n of a PeerRouted topology runs with: its own
// name is 127.0.0.1, where it listens; every other node's name is the route
// from n to it.
func (t Topology) Hosts(n Node) string {
	lines := []string{
		Host + " localhost",
		Host + " " + PeerName(n),
	}
	for _, m := range t.Nodes {
		if m.Name != n.Name {
			lines = append(lines, RouteAddr(n, m)+" "+PeerName(m))
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// peerHost is the host part of node m's peer addresses.
func (t Topology) peerHost(m Node) string {
	if t.PeerRouted {
		return PeerName(m)
	}
	return Host
}

// checkRouted reports why t cannot be PeerRouted, if it cannot.
func checkRouted(t Topology) error {
	if !t.PeerRouted {
		return nil
	}
	if !t.Cluster || (t.Kind != Etcd && t.Kind != ZooKeeper) {
		return fmt.Errorf("topology %s: only etcd and ZooKeeper clusters can be peer-routed", t.Name)
	}
	for _, n := range t.Nodes {
		if n.ID < 1 || n.ID > 254 {
			return fmt.Errorf("topology %s: node %s has ID %d; a peer route needs 1-254", t.Name, n.Name, n.ID)
		}
	}
	return nil
}
