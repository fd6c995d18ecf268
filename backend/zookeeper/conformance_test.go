package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// testPrefix keeps the tests' nodes apart from anything else on the shared
// servers.
const testPrefix = "/dlock-test"

// sessionTimeout is short so that the suite's expiry cases are quick, and
// long enough for a loaded machine: a hold is given up half a session
// timeout after the last answered heartbeat, and ManyKeys queues hundreds
// of requests on one connection ahead of the heartbeats. The servers run
// with a 500 ms tick, so 1 s to 10 s is allowed.
const sessionTimeout = 4 * time.Second

// endpoint returns the URL in env with the test prefix and params set.
func endpoint(t testing.TB, env string, params string) string {
	t.Helper()
	raw := testenv.Endpoint(t, env)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s=%q: %v", env, raw, err)
	}
	u.Path = testPrefix
	u.RawQuery = params
	return u.String()
}

// openLocker is dlock.Open with Mutex defaults given as options.
func openLocker(ctx context.Context, raw string, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := openDriver(ctx, raw)
	if err != nil {
		return nil, err
	}
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}

// openDriver dials the driver for a zk:// URL.
func openDriver(ctx context.Context, raw string) (*zkDriver, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	o, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return dialDriver(ctx, o)
}

// hosts returns the servers of a zk:// URL.
func hosts(t testing.TB, raw string) []string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(u.Host, ",")
}

// admin is a plain go-zookeeper connection for breaking things from
// outside, closed when the test ends.
func admin(t testing.TB, raw string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(hosts(t, raw), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func harness(t *testing.T, env string) conformance.Harness {
	raw := endpoint(t, env, "session_timeout="+sessionTimeout.String())
	adm := admin(t, raw)
	return conformance.Harness{
		NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			return openLocker(ctx, raw, opts...)
		},
		NewDriver: func(ctx context.Context) (driver.Locker, error) {
			return openDriver(ctx, raw)
		},
		Unreachable: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			return dlock.Open(ctx, "zk://"+addr+"/dlock-test?session_timeout=2s")
		},
		BreakLease: func(ctx context.Context, key string) error {
			return breakLease(adm, key)
		},
		URL:          raw,
		CutOff:       conformance.CutOffURL(raw),
		TTL:          sessionTimeout,
		MaxTTL:       sessionTimeout,
		ExpiryGrace:  500 * time.Millisecond,
		SessionLease: true,
		Queue:        true,
	}
}

// breakLease deletes every lock node of key, as an operator would.
func breakLease(adm *zk.Conn, key string) error {
	kp, err := KeyPath(testPrefix, key)
	if err != nil {
		return err
	}
	// The admin's server may be a follower that has not applied the
	// create yet: sync first, as the driver does before it lists.
	if _, err := adm.Sync(kp); err != nil {
		return fmt.Errorf("sync %s: %w", kp, err)
	}
	children, _, err := adm.Children(kp)
	if err != nil {
		return fmt.Errorf("list %s: %w", kp, err)
	}
	if len(children) == 0 {
		return fmt.Errorf("key %q not held", key)
	}
	for _, c := range children {
		if err := adm.Delete(kp+"/"+c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}

func TestConformance(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { conformance.Run(t, harness(t, "DLOCK_ZK_URL")) })
	t.Run("ensemble", func(t *testing.T) { conformance.Run(t, harness(t, "DLOCK_ZK3_URL")) })
	// Over connections the caller made (New): no event callback, and the
	// session timeout is the one declared rather than read off the wire.
	t.Run("standalone-conn", func(t *testing.T) {
		h := harness(t, "DLOCK_ZK_URL")
		servers := hosts(t, endpoint(t, "DLOCK_ZK_URL", ""))
		h.NewLocker = func(_ context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			return newOverConn(servers, opts...)
		}
		h.UnreachableClient = func(_ context.Context, addr string) (*dlock.Locker, error) {
			return newOverConn([]string{addr}, dlock.WithTTL(sessionTimeout))
		}
		conformance.Run(t, h)
	})
}

func newOverConn(servers []string, opts ...dlock.Option) (*dlock.Locker, error) {
	conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithLogInfo(false), zk.WithLogger(discardLogger{}))
	if err != nil {
		return nil, err
	}
	closeConn := dlock.WithOnClose(func() error { conn.Close(); return nil })
	l, err := New(conn, Config{SessionTimeout: sessionTimeout, Prefix: testPrefix}, append(opts, closeConn)...)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return l, nil
}

func BenchmarkConformance(b *testing.B) {
	b.Run("standalone", func(b *testing.B) {
		conformance.RunBenchmarks(b, benchHarness(b, "DLOCK_ZK_URL"))
	})
	b.Run("ensemble", func(b *testing.B) {
		conformance.RunBenchmarks(b, benchHarness(b, "DLOCK_ZK3_URL"))
	})
}

func benchHarness(b *testing.B, env string) conformance.Harness {
	raw := endpoint(b, env, "session_timeout=10s")
	return conformance.Harness{
		NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			return openLocker(ctx, raw, opts...)
		},
		BreakLease:   func(context.Context, string) error { return errors.New("not used") },
		TTL:          10 * time.Second,
		MaxTTL:       10 * time.Second,
		SessionLease: true,
		Queue:        true,
	}
}
