package consul

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// testPrefix is the KV prefix of every test here; keys below it carry a
// random run id, so concurrent runs never collide.
const testPrefix = "dlock-test"

// endpoint returns the dev agent's URL, consul://127.0.0.1:8500.
func endpoint(t testing.TB) string {
	t.Helper()
	return testenv.Endpoint(t, "DLOCK_CONSUL_URL")
}

// testURL is the agent's URL with the test prefix and extra parameters.
func testURL(t testing.TB, raw string, params string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("DLOCK_CONSUL_URL=%q: %v", raw, err)
	}
	u.Path = "/" + testPrefix
	u.RawQuery = params
	return u
}

// admin is a separate client, as an operator's would be.
type admin struct{ c *api.Client }

func newAdmin(t testing.TB, raw string) admin { return admin{newClient(t, raw)} }

// newClient makes a Consul client of its own for the agent at raw, as a
// separate process would have; its connections close when the test ends.
func newClient(t testing.TB, raw string) *api.Client {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = testURL(t, raw, "").Host
	tr := api.DefaultConfig().Transport
	cfg.Transport = tr
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return c
}

// breakLease destroys the session holding key, as an operator would.
func (a admin) breakLease(ctx context.Context, key string) (string, error) {
	path := testPrefix + "/" + encodeKey(key)
	kv, _, err := a.c.KV().Get(path, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "", err
	}
	if kv == nil || kv.Session == "" {
		return "", fmt.Errorf("key %q (%s) is not locked", key, path)
	}
	_, err = a.c.Session().Destroy(kv.Session, (&api.WriteOptions{}).WithContext(ctx))
	return kv.Session, err
}

func harness(t testing.TB) conformance.Harness {
	raw := endpoint(t)
	a := newAdmin(t, raw)
	return conformance.Harness{
		NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			d, err := open(ctx, testURL(t, raw, "lockdelay=1ms"))
			if err != nil {
				return nil, err
			}
			l, err := dlock.NewLocker(d, opts...)
			if err != nil {
				_ = d.Close() // refused options (InspectErrors): the driver is ours to close
				return nil, err
			}
			return l, nil
		},
		NewDriver: func(ctx context.Context) (driver.Locker, error) {
			return open(ctx, testURL(t, raw, "lockdelay=1ms"))
		},
		Unreachable: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			d, err := open(ctx, &url.URL{Scheme: Scheme, Host: addr, Path: "/" + testPrefix})
			if err != nil {
				return nil, err
			}
			return dlock.NewLocker(d)
		},
		UnreachableClient: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			cfg := api.DefaultConfig()
			cfg.Address = addr
			c, err := api.NewClient(cfg)
			if err != nil {
				return nil, err
			}
			return New(c, Config{Prefix: testPrefix})
		},
		BreakLease: func(ctx context.Context, key string) error {
			_, err := a.breakLease(ctx, key)
			return err
		},
		URL:         testURL(t, raw, "lockdelay=1ms").String(),
		CutOff:      conformance.CutOffURL(testURL(t, raw, "lockdelay=1ms").String()),
		TTL:         MinTTL,
		ExpiryGrace: MinTTL, // Consul invalidates a session at up to 2*TTL
		MaxTTL:      MaxTTL,
	}
}

func TestConformance(t *testing.T) {
	t.Run("dev", func(t *testing.T) { conformance.Run(t, harness(t)) })
}

func BenchmarkConformance(b *testing.B) {
	b.Run("dev", func(b *testing.B) { conformance.RunBenchmarks(b, harness(b)) })
}
