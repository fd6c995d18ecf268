package zookeeper

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/internal/topology"
)

// routedEnsemble is a private copy of the zookeeper3 topology whose members
// reach each other only through proxies, one per ordered pair of members
// and peer port (topology.PeerRouted), so that one member can be cut off
// from its peers while its clients still reach it.
type routedEnsemble struct {
	l      *launcher.Launcher
	tp     topology.Topology
	routes map[[2]string][]*proxy // (from, to) node names
}

func startRoutedEnsemble(t *testing.T) *routedEnsemble {
	t.Helper()
	testenv.Endpoint(t, "DLOCK_ZK3_URL") // ZooKeeper is installed
	base, ok := topology.Lookup(topology.All(), "zookeeper3")
	if !ok {
		t.Fatal("no zookeeper3 topology")
	}
	tp, err := launcher.Private(base, fmt.Sprintf("zkrouted%d", rand.IntN(1_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	tp.PeerRouted = true
	e := &routedEnsemble{tp: tp, routes: map[[2]string][]*proxy{}}
	for _, from := range tp.Nodes {
		for _, to := range tp.Nodes {
			if from.Name == to.Name {
				continue
			}
			for _, port := range tp.RoutePorts(from, to) {
				// Late routes open only after a heal (see
				// topology.LateRoute); this ensemble is never healed.
				if tp.LateRoute(from, to, port) {
					continue
				}
				num := strconv.Itoa(to.Port(port))
				px := newProxyAt(t, net.JoinHostPort(topology.RouteAddr(from, to), num), net.JoinHostPort(topology.Host, num))
				e.routes[[2]string{from.Name, to.Name}] = append(e.routes[[2]string{from.Name, to.Name}], px)
			}
		}
	}
	if e.l, err = launcher.New(t.TempDir(), []topology.Topology{tp}); err != nil {
		t.Fatal(err)
	}
	e.l.ReadyTimeout = 2 * time.Minute
	t.Cleanup(func() {
		if err := e.l.Down(context.Background()); err != nil {
			t.Errorf("stopping %s: %v", tp.Name, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := e.l.Up(ctx, []string{tp.Name}); err != nil {
		t.Fatalf("starting %s: %v", tp.Name, err)
	}
	return e
}

// isolate cuts every route to and from node: its peers no longer hear it,
// nor it them.
func (e *routedEnsemble) isolate(node string) {
	for pair, pxs := range e.routes {
		if pair[0] == node || pair[1] == node {
			for _, px := range pxs {
				px.block()
			}
		}
	}
}

// A client connected only to a follower that is cut off from its peers,
// while the leader's side expires its session and grants the lock to a
// client waiting there: the cut-off holder's Done must close before the
// other client's Lock returns. The follower goes on answering its clients
// from its own copy of the data for syncLimit x tickTime (5 s here) after
// it lost the leader, so a session or a renewal confirmed by such local
// answers outlives the session on the leader.
func TestFollowerCutOffLosesBeforeNextGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a private ZooKeeper ensemble")
	}
	e := startRoutedEnsemble(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader, err := e.l.Leader(ctx, e.tp.Name)
	if err != nil {
		t.Fatal(err)
	}
	var follower topology.Node
	var side []string
	for _, n := range e.tp.Nodes {
		if n.Name != leader && follower.Name == "" {
			follower = n
			continue
		}
		side = append(side, n.Addr())
	}
	query := testPrefix + "?session_timeout=" + sessionTimeout.String()
	_, cut := lockerOn(t, "zk://"+follower.Addr()+query, dlock.WithTTL(sessionTimeout))
	_, other := lockerOn(t, "zk://"+strings.Join(side, ",")+query, dlock.WithTTL(sessionTimeout))
	key := fmt.Sprintf("follower-cut/%d", time.Now().UnixNano())
	held, err := cut.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	lockNow(t, held)
	waiter, err := other.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	// Let the waiter queue and the holder renew a few times on a healthy
	// ensemble first.
	time.Sleep(sessionTimeout)
	select {
	case err := <-got:
		t.Fatalf("the waiter's Lock returned while the key was held: %v", err)
	default:
	}

	e.isolate(follower.Name)
	cutAt := time.Now()
	lostAt := make(chan time.Time, 1)
	go func() {
		<-held.Done()
		lostAt <- time.Now()
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter's Lock on the leader's side: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the leader's side did not grant the lock within a minute of the cut")
	}
	grantedAt := time.Now()
	defer func() { _ = waiter.Unlock(context.Background()) }()
	select {
	case at := <-lostAt:
		t.Logf("follower %s cut off (leader %s): holder's Done closed %v after the cut, %v before the next grant",
			follower.Name, leader, at.Sub(cutAt).Round(time.Millisecond), grantedAt.Sub(at).Round(time.Millisecond))
	default:
		t.Fatalf("the next holder's Lock returned %v after the cut while the cut-off holder's Done was still open (lease to %v after the grant)",
			grantedAt.Sub(cutAt).Round(time.Millisecond), time.Until(held.Lease().Expires).Round(time.Millisecond))
	}
	if l := held.Lease(); l.Valid() {
		t.Fatalf("the cut-off holder's lease is still valid (%v left) after the next grant", time.Until(l.Expires))
	}
}
