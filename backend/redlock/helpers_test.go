package redlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// endpoint returns the redlock topology's URL, or skips (fails under
// DLOCK_REQUIRE_BACKENDS).
func endpoint(t testing.TB) string { return testenv.Endpoint(t, "DLOCK_REDLOCK_URL") }

// hostsOf returns the host:port list of a redlock:// URL.
func hostsOf(t testing.TB, raw string) []string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("endpoint %q: %v", raw, err)
	}
	return strings.Split(u.Host, ",")
}

// withParams adds query parameters to a redlock:// URL.
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

// testPrefix is a key prefix no other test or run shares.
func testPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "dlocktest:redlock:" + hex.EncodeToString(b[:]) + ":"
}

// adminClients are plain clients on every host, closed when the test ends.
func adminClients(t testing.TB, hosts []string) []*redis.Client {
	t.Helper()
	cs := make([]*redis.Client, len(hosts))
	for i, h := range hosts {
		cs[i] = redis.NewClient(&redis.Options{Addr: h, MaxRetries: -1, DialTimeout: time.Second})
		c := cs[i]
		t.Cleanup(func() { _ = c.Close() })
	}
	return cs
}

// openDriver opens a driver on rawURL, closed when the test ends.
func openDriver(t testing.TB, rawURL string) *redlock.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := redlock.OpenDriver(ctx, rawURL)
	if err != nil {
		t.Fatalf("OpenDriver(%q): %v", rawURL, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// openLocker opens a Locker over a driver on rawURL, closed when the test
// ends.
func openLocker(t testing.TB, rawURL string) *dlock.Locker {
	t.Helper()
	l, err := dlock.NewLocker(openDriver(t, rawURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
