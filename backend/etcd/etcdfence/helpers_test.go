package etcdfence_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock/internal/testenv"
)

// unique and testCtx name the shared helpers as this package's tests use
// them.
func unique(t testing.TB, base string) string { return testenv.Unique(t, base) }

func testCtx(t testing.TB) context.Context { return testenv.Context(t, 2*time.Minute) }

// openEtcd connects to the etcd topology (DLOCK_ETCD_URL, etcd://host:port).
func openEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	u, err := url.Parse(testenv.Endpoint(t, "DLOCK_ETCD_URL"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(u.Host, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, "health"); err != nil {
		t.Fatalf("etcd: %v", err)
	}
	return c
}

// cleanEtcd deletes the keys under prefix when the test ends.
func cleanEtcd(t testing.TB, c *clientv3.Client, prefix string) {
	t.Cleanup(func() {
		if _, err := c.Delete(context.Background(), prefix, clientv3.WithPrefix()); err != nil {
			t.Errorf("etcd cleanup: %v", err)
		}
	})
}
