package etcd_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// topology is one etcd deployment the tests run against.
type topology struct {
	name   string // subtest name
	envVar string
}

var topologies = []topology{
	{"single", "DLOCK_ETCD_URL"},
	{"cluster3", "DLOCK_ETCD3_URL"},
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// env is one topology's endpoint, a key prefix unique to the test, and an
// admin client (separate from every Locker's) that breaks leases.
type env struct {
	perHold bool // Lockers made by newLocker use Config.LeasePerHold
	url     string
	cfg     clientv3.Config
	prefix  string
	admin   *clientv3.Client
}

func newEnv(t testing.TB, envVar string) *env {
	t.Helper()
	raw := testenv.Endpoint(t, envVar)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s=%q: %v", envVar, raw, err)
	}
	cfg, _, err := etcd.ParseURL(u)
	if err != nil {
		t.Fatalf("%s=%q: %v", envVar, raw, err)
	}
	e := &env{url: raw, cfg: cfg, prefix: "dlock-test/" + randomID() + "/"}
	e.admin = e.client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = e.admin.Delete(ctx, e.prefix, clientv3.WithPrefix())
	})
	return e
}

// client returns a new client of the topology, closed when the test ends.
func (e *env) client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(e.cfg)
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// etcdNew is etcd.New, for tests that build their own client.
var etcdNew = etcd.New

func (e *env) newLocker(_ context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
	cli, err := clientv3.New(e.cfg)
	if err != nil {
		return nil, err
	}
	// The Locker closes its own client: two of them behave like two
	// processes.
	l, err := etcd.New(cli, etcd.Config{Prefix: e.prefix, LeasePerHold: e.perHold}, append(opts, dlock.WithOnClose(cli.Close))...)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return l, nil
}

// mustLocker is newLocker for tests, closed when the test ends.
func (e *env) mustLocker(t testing.TB, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	l, err := e.newLocker(context.Background(), opts...)
	if err != nil {
		t.Fatalf("newLocker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// lockerOn is a Locker under e's prefix (one shared lease, whatever
// e.perHold says) on a client of its own made from cfg, a counting client
// say; both are closed when t ends.
func (e *env) lockerOn(t testing.TB, cfg clientv3.Config, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	l, err := etcd.New(cli, etcd.Config{Prefix: e.prefix}, opts...)
	if err != nil {
		t.Fatalf("etcd.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// holder returns the entry at the head of key's queue.
func (e *env) holder(ctx context.Context, key string) (*clientv3.GetResponse, error) {
	return e.admin.Get(ctx, etcd.QueuePrefix(e.prefix, key), clientv3.WithFirstCreate()...)
}

// breakLease revokes the lease of key's current holder.
func (e *env) breakLease(ctx context.Context, key string) error {
	resp, err := e.holder(ctx, key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("key %q not held", key)
	}
	_, err = e.admin.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	return err
}

// queueLen counts the entries of key's queue.
func (e *env) queueLen(ctx context.Context, key string) (int64, error) {
	resp, err := e.admin.Get(ctx, etcd.QueuePrefix(e.prefix, key), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

func (e *env) harness() conformance.Harness {
	return conformance.Harness{
		NewLocker: e.newLocker,
		NewDriver: func(context.Context) (driver.Locker, error) {
			cli, err := clientv3.New(e.cfg)
			if err != nil {
				return nil, err
			}
			return etcd.NewDriver(cli, etcd.Config{Prefix: e.prefix, LeasePerHold: e.perHold}), nil
		},
		Unreachable: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			return dlock.Open(ctx, "etcd://"+addr+"/"+e.prefix)
		},
		UnreachableClient: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			cfg := e.cfg
			cfg.Endpoints, cfg.DialTimeout = []string{addr}, 0 // no blocking dial
			cli, err := clientv3.New(cfg)
			if err != nil {
				return nil, err
			}
			l, err := etcd.New(cli, etcd.Config{Prefix: e.prefix, LeasePerHold: e.perHold}, dlock.WithOnClose(cli.Close))
			if err != nil {
				_ = cli.Close()
				return nil, err
			}
			return l, nil
		},
		BreakLease:  e.breakLease,
		URL:         e.url + "/" + e.prefix,
		CutOff:      conformance.CutOffURL(e.url + "/" + e.prefix),
		TTL:         etcd.MinTTL,
		ExpiryGrace: time.Second, // the leader checks for expired leases every 500ms
		Queue:       true,
	}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
