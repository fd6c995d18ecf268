package etcd

import (
	"context"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/internal/testenv"
)

// recEnv is one topology, a prefix unique to the test and an admin client
// of its own.
type recEnv struct {
	cfg    clientv3.Config
	prefix string
	admin  *clientv3.Client
}

// recordTopologies are the etcd deployments the record tests run on.
var recordTopologies = []struct{ name, envVar string }{
	{"single", "DLOCK_ETCD_URL"},
	{"cluster3", "DLOCK_ETCD3_URL"},
}

// eachRecordTopology runs fn on the single member and on the 3-member
// cluster.
func eachRecordTopology(t *testing.T, fn func(t *testing.T, e *recEnv)) {
	for _, tp := range recordTopologies {
		t.Run(tp.name, func(t *testing.T) { fn(t, newRecEnv(t, tp.envVar)) })
	}
}

func newRecEnv(t *testing.T, envVar string) *recEnv {
	t.Helper()
	u, err := url.Parse(testenv.Endpoint(t, envVar))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &recEnv{cfg: cfg, prefix: "dlock-test/" + owner()[:12] + "/", admin: admin}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Delete(ctx, e.prefix, clientv3.WithPrefix())
		_ = admin.Close()
	})
	return e
}

// driver returns a driver with a client of its own (as a separate process
// would have) under prefix, closed when the test ends.
func (e *recEnv) driver(t *testing.T, prefix string) *drv {
	t.Helper()
	cli, err := clientv3.New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(cli, Config{Prefix: prefix}, true)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func mustRecord(t *testing.T, d *drv, key, value, want string) {
	t.Helper()
	got, err := d.Record(ctxFor(t, 30*time.Second), key, value)
	if err != nil {
		t.Fatalf("Record(%.40q, %q): %v", key, value, err)
	}
	if got != want {
		t.Fatalf("Record(%.40q, %q) = %q; want %q", key, value, got, want)
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The record is a plain key under the Locker's prefix, without a lease;
// another prefix is another namespace.
func TestRecordLayout(t *testing.T) {
	eachRecordTopology(t, func(t *testing.T, e *recEnv) {
		d1, d2 := e.driver(t, e.prefix), e.driver(t, e.prefix)
		mustRecord(t, d1, "sem", "permits=3", "permits=3")
		mustRecord(t, d1, "sem", "permits=5", "permits=3")
		mustRecord(t, d2, "sem", "permits=7", "permits=3")
		resp, err := e.admin.Get(ctxFor(t, 10*time.Second), e.prefix+recordDir+"sem")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "permits=3" || resp.Kvs[0].Lease != 0 {
			t.Fatalf("record in etcd: %v; want permits=3 without a lease", resp.Kvs)
		}
		// Another prefix is another namespace.
		other := e.driver(t, e.prefix+"other")
		mustRecord(t, other, "sem", "permits=9", "permits=9")
		mustRecord(t, d2, "sem", "permits=9", "permits=3")
	})
}

// A record written before a leader change is the record after it (on the
// 3-member cluster: leadership moved to a follower).
func TestRecordLeaderChange(t *testing.T) {
	e := newRecEnv(t, "DLOCK_ETCD3_URL")
	if len(e.cfg.Endpoints) < 3 {
		t.Fatalf("DLOCK_ETCD3_URL has %d members; want 3", len(e.cfg.Endpoints))
	}
	mustRecord(t, e.driver(t, e.prefix), "lc", "permits=4", "permits=4")
	ctx := ctxFor(t, time.Minute)
	leaderEP, leaderID, other := "", uint64(0), uint64(0)
	for _, ep := range e.cfg.Endpoints {
		st, err := e.admin.Status(ctx, ep)
		if err != nil {
			t.Fatalf("Status(%s): %v", ep, err)
		}
		if st.Header.MemberId == st.Leader {
			leaderEP, leaderID = ep, st.Leader
		} else {
			other = st.Header.MemberId
		}
	}
	if leaderEP == "" || other == 0 {
		t.Fatal("no leader and follower found")
	}
	cfg := e.cfg
	cfg.Endpoints = []string{leaderEP}
	lc, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if _, err := lc.MoveLeader(ctx, other); err != nil {
		t.Fatalf("MoveLeader: %v", err)
	}
	for {
		st, err := e.admin.Status(ctx, leaderEP)
		if err == nil && st.Leader != 0 && st.Leader != leaderID {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("leadership did not move")
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := e.driver(t, e.prefix)
	mustRecord(t, d, "lc", "permits=5", "permits=4")
	if ok, err := d.ClearRecord(ctx, "lc", "permits=4"); err != nil || !ok {
		t.Fatalf("ClearRecord after the leader change = %v, %v; want true", ok, err)
	}
}
