package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/etcd"
	_ "github.com/dlock-go/dlock/backend/zookeeper"
	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/testenv"
)

// routedClusters are the clusters that run peer-routed: the topology each
// copies, its endpoint variable (set when its servers are installed), and
// how to reach one node of it.
var routedClusters = []struct{ base, env, scheme, query string }{
	{"etcd3", "DLOCK_ETCD3_URL", "etcd", ""},
	{"zookeeper3", "DLOCK_ZK3_URL", "zk", "?session_timeout=2s"},
}

// TestPeerRoutes checks the partition the leader-isolation scenario relies
// on, on private peer-routed clusters:
//   - every node sees its own hosts file, so the cluster can only have
//     formed through the route proxies;
//   - cutting the leader's routes makes the other two elect another leader,
//     and the cut-off node grants no lock, even to a client that reaches it;
//   - after the heal the old leader rejoins and grants locks again.
func TestPeerRoutes(t *testing.T) {
	for _, c := range routedClusters {
		t.Run(c.base, func(t *testing.T) {
			testenv.Endpoint(t, c.env) // the servers are installed
			px := NewProxies()
			defer px.Close()
			cl := StartCluster(t, px, c.base)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			checkHostsFiles(ctx, t, cl)
			lockVia := func(node string) error {
				n, _ := cl.T.Node(node)
				return lockOnce(ctx, c.scheme+"://"+n.Addr()+c.query)
			}
			leader, err := cl.L.Leader(ctx, cl.T.Name)
			if err != nil {
				t.Fatal(err)
			}
			if top := cl.T.Nodes[len(cl.T.Nodes)-1].Name; c.base == "zookeeper3" && leader == top {
				// A cut-off ZooKeeper server with a lower ID than the new
				// leader rejoins only through a late route: make sure the
				// leader is not the highest ID, by restarting it.
				if err := cl.L.Kill(ctx, top); err != nil {
					t.Fatal(err)
				}
				if leader, err = cl.NewLeader(ctx, top); err != nil {
					t.Fatal(err)
				}
				if err := cl.L.Start(ctx, top); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("leader before the cut: %s", leader)
			if err := lockVia(leader); err != nil {
				t.Fatalf("lock through the leader %s before the cut: %v", leader, err)
			}
			old, link := cl.CutLeader(ctx, t)
			nctx, ncancel := context.WithTimeout(ctx, time.Minute)
			defer ncancel()
			nl, err := cl.NewLeader(nctx, old)
			if err != nil {
				t.Fatal(err)
			}
			if err := lockVia(nl); err != nil {
				t.Errorf("lock through the new leader %s: %v", nl, err)
			}
			if err := lockVia(old); err == nil {
				t.Errorf("the isolated node %s granted a lock", old)
			} else if errors.Is(err, dlock.ErrInvalidURL) || errors.Is(err, dlock.ErrInvalidOption) {
				t.Errorf("lock through the isolated node %s: %v", old, err)
			}
			if err := cl.Heal(link); err != nil {
				t.Fatal(err)
			}
			var last error
			for try := 0; try < 30; try++ {
				if last = lockVia(old); last == nil {
					return
				}
				time.Sleep(time.Second)
			}
			t.Errorf("%s did not rejoin after the heal: %v", old, last)
		})
	}
}

// TestPeerRoutesSlowFirstNode starts peer-routed clusters whose first node
// is paused for a while as soon as it is spawned, as a JVM on a loaded
// machine may be slow to come up. The cluster must still form with every
// node serving: a ZooKeeper server with a lower ID cannot announce itself
// over the routes (topology.LateRoute), so if the others elected a leader
// before it listened, nobody would ever call it (topology.StartGate).
func TestPeerRoutesSlowFirstNode(t *testing.T) {
	for _, c := range routedClusters {
		t.Run(c.base, func(t *testing.T) {
			testenv.Endpoint(t, c.env) // the servers are installed
			px := NewProxies()
			defer px.Close()
			var resumed sync.WaitGroup
			defer resumed.Wait()
			cl := StartCluster(t, px, c.base, func(l *launcher.Launcher) {
				first := ""
				l.Started = func(node string, pid int) {
					if first != "" {
						return
					}
					first = node
					if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
						t.Errorf("pausing %s: %v", node, err)
						return
					}
					resumed.Add(1)
					time.AfterFunc(slowStart, func() {
						defer resumed.Done()
						_ = syscall.Kill(pid, syscall.SIGCONT)
					})
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, n := range cl.T.Nodes {
				if err := lockOnce(ctx, c.scheme+"://"+n.Addr()+c.query); err != nil {
					t.Errorf("lock through %s: %v", n.Name, err)
				}
			}
		})
	}
}

// slowStart is how long TestPeerRoutesSlowFirstNode holds its first node:
// longer than the other two take to elect a leader between themselves.
const slowStart = 8 * time.Second

// checkHostsFiles checks that every node of cl sees its own hosts file.
func checkHostsFiles(ctx context.Context, t *testing.T, cl *Cluster) {
	t.Helper()
	st, err := cl.L.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		n, _ := cl.T.Node(s.Node)
		got, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/hosts", s.PID))
		if err != nil {
			t.Fatalf("%s: %v", s.Node, err)
		}
		if want := cl.T.Hosts(n); string(got) != want {
			t.Errorf("%s sees /etc/hosts\n%s\nwant\n%s", s.Node, got, want)
		}
	}
}

// lockOnce opens a Locker on url and takes and releases one lock, failing
// if that does not happen within 5 s.
func lockOnce(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := dlock.Open(ctx, url)
	if err != nil {
		return err
	}
	defer l.Close()
	m, err := l.NewMutex("dlock-faults/routes")
	if err != nil {
		return err
	}
	if err := m.Lock(ctx); err != nil {
		return err
	}
	return m.Unlock(ctx)
}
