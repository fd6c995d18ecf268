package redis

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// testPrefix keeps this package's keys apart from other users of the shared
// test servers.
const testPrefix = "dlock-redis-test"

// topology is one server setup the tests run against.
type topology struct {
	name   string
	envVar string
}

var topologies = []topology{
	{"standalone", "DLOCK_REDIS_URL"},
	{"cluster", "DLOCK_REDIS_CLUSTER_URL"},
	{"sentinel", "DLOCK_REDIS_SENTINEL_URL"},
}

// eachTopology runs fn as a subtest per topology, with its endpoint.
func eachTopology(t *testing.T, fn func(t *testing.T, endpoint string)) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) { fn(t, testenv.Endpoint(t, tp.envVar)) })
	}
}

// withParams adds query parameters to a backend URL.
func withParams(t testing.TB, raw string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("endpoint %q: %v", raw, err)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// openLocker opens a Locker on raw with its own connections, with opts as
// the Locker's defaults.
func openLocker(ctx context.Context, raw string, opts ...dlock.Option) (*dlock.Locker, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	d, err := openDriver(ctx, u, newClient)
	if err != nil {
		return nil, err
	}
	return lockerOver(d, opts)
}

// openMutex opens a Locker on raw (closed when the test ends) and returns
// a Mutex on key from it.
func openMutex(ctx context.Context, t testing.TB, raw, key string, opts ...dlock.Option) *dlock.Mutex {
	t.Helper()
	l, err := openLocker(ctx, raw, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatalf("NewMutex(%q): %v", key, err)
	}
	return m
}

// adminClient is a separate client for looking at and breaking locks from
// outside, as an operator would.
func adminClient(t testing.TB, raw string) goredis.UniversalClient {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, err := parseOwnParams(u)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient(rest)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func harness(t testing.TB, endpoint string) conformance.Harness {
	raw := withParams(t, endpoint, "prefix", testPrefix)
	admin := adminClient(t, raw)
	scheme := "redis://"
	u, _ := url.Parse(endpoint)
	if u != nil && u.Scheme == "redis+cluster" {
		scheme = "redis+cluster://"
	}
	var cutOff func(testing.TB, context.Context, ...dlock.Option) (*dlock.Locker, conformance.Link, error)
	if u != nil && u.Scheme == "redis" {
		// Cluster and Sentinel clients find their servers through the
		// ones the URL names: the cut runs on standalone.
		cutOff = conformance.CutOffURL(raw)
	}
	return conformance.Harness{
		CutOff: cutOff,
		NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			return openLocker(ctx, raw, opts...)
		},
		NewDriver: func(ctx context.Context) (driver.Locker, error) {
			u, err := url.Parse(raw)
			if err != nil {
				return nil, err
			}
			return openDriver(ctx, u, newClient)
		},
		Unreachable: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			return dlock.Open(ctx, scheme+addr)
		},
		BreakLease: func(ctx context.Context, key string) error {
			n, err := admin.Del(ctx, LockKey(testPrefix, key)).Result()
			if err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("lock key of %q not found", key)
			}
			return nil
		},
		URL: raw,
		TTL: time.Second,
		// Redis expires a key on access, to the millisecond.
		ExpiryGrace: 50 * time.Millisecond,
		// Waiting Locks queue in the key's :queue list.
		Queue: true,
	}
}

func TestConformance(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) { conformance.Run(t, harness(t, endpoint)) })
}

func BenchmarkConformance(b *testing.B) {
	for _, tp := range topologies {
		b.Run(tp.name, func(b *testing.B) {
			conformance.RunBenchmarks(b, harness(b, testenv.Endpoint(b, tp.envVar)))
		})
	}
}
