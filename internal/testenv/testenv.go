// Package testenv gives tests the endpoints of the real servers they run
// against.
//
// Endpoints come from environment variables (DLOCK_REDIS_URL, DLOCK_ETCD_URL,
// ...), written by the native launcher into .dlock/endpoints.env. Locally a
// missing variable skips the test, so `go test github.com/dlock-go/dlock/...`
// works without servers.
// When DLOCK_REQUIRE_BACKENDS is "all", or lists the backend, a missing
// variable fails the test instead: `make test` and CI set it so a backend can
// never be skipped silently.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"
)

// RequireVar is the environment variable that turns a missing endpoint from
// a skip into a failure. Its value is "all", or a list of backends separated
// by commas or spaces; a backend may be named by its variable
// (DLOCK_ETCD3_URL), by the variable without the DLOCK_ prefix and _URL
// suffix (etcd3, redis_cluster or redis-cluster), or by its topology name
// (zookeeper for DLOCK_ZK_URL).
const RequireVar = "DLOCK_REQUIRE_BACKENDS"

// aliases maps topology names whose short form differs from the variable.
var aliases = map[string]string{
	"zookeeper":  "zk",
	"zookeeper3": "zk3",
}

// Endpoint returns the value of the environment variable name, for example
// Endpoint(t, "DLOCK_REDIS_URL"). If it is unset or empty, the test fails
// when the backend is required (see RequireVar) and is skipped otherwise.
func Endpoint(t testing.TB, name string) string {
	t.Helper()
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	if Required(name) {
		t.Fatalf("%s is not set but %s=%q requires it (run `make up` and source .dlock/endpoints.env)",
			name, RequireVar, os.Getenv(RequireVar))
	}
	t.Skipf("set %s (run `make up` and source .dlock/endpoints.env)", name)
	return ""
}

// Required reports whether DLOCK_REQUIRE_BACKENDS requires the endpoint
// variable name.
func Required(name string) bool {
	want := short(name)
	for _, f := range strings.FieldsFunc(os.Getenv(RequireVar), func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n'
	}) {
		f = strings.ToLower(f)
		if f == "all" {
			return true
		}
		s := short(f)
		if a, ok := aliases[s]; ok {
			s = a
		}
		if s == want {
			return true
		}
	}
	return false
}

// short turns DLOCK_REDIS_CLUSTER_URL, redis_cluster and redis-cluster all
// into "redis_cluster".
func short(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "dlock_")
	s = strings.TrimSuffix(s, "_url")
	return strings.ReplaceAll(s, "-", "_")
}

// Unique returns base followed by a random suffix, a name no other test run
// uses, for tables and key prefixes on the shared servers.
func Unique(t testing.TB, base string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base + "_" + hex.EncodeToString(b)
}

// Context returns a context that ends after d or when the test ends,
// whichever comes first: a bound on a test that would otherwise hang.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
