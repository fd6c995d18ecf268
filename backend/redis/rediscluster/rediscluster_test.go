package rediscluster_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis/rediscluster"
	"github.com/dlock-go/dlock/internal/testenv"
)

// Importing the package registers both schemes, and a URL of either opens
// a Locker that locks on the Cluster, with tokens increasing.
func TestOpenLocksOnTheCluster(t *testing.T) {
	for _, s := range []string{rediscluster.Scheme, rediscluster.SchemeTLS} {
		if !slices.Contains(dlock.Schemes(), s) {
			t.Fatalf("scheme %s not registered: %v", s, dlock.Schemes())
		}
	}
	raw := testenv.Endpoint(t, "DLOCK_REDIS_CLUSTER_URL")
	ctx := testenv.Context(t, time.Minute)
	l, err := dlock.Open(ctx, raw+"?prefix="+testenv.Unique(t, "rc"))
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	defer l.Close()
	var last dlock.Token
	for _, key := range []string{"a", "b", "a"} {
		m, err := l.NewMutex(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock %s: %v", key, err)
		}
		if key == "a" && m.Token() <= last {
			t.Fatalf("token %d after %d", m.Token(), last)
		}
		if key == "a" {
			last = m.Token()
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock %s: %v", key, err)
		}
	}
}

// Malformed Cluster URLs are refused with ErrInvalidURL before any dial.
func TestInvalidURLs(t *testing.T) {
	ctx := testenv.Context(t, 10*time.Second)
	for _, raw := range []string{
		"redis+cluster://",                         // no hosts
		"redis+cluster://127.0.0.1:1,,127.0.0.1:2", // empty host
		"redis+cluster://127.0.0.1:1/0",            // a Cluster has no db
		"redis+cluster://127.0.0.1:1?db=0",         // not even as a parameter
		"redis+cluster://127.0.0.1:1?prefix={x}",   // the prefix may not name a hash tag
		"rediss+cluster://127.0.0.1:1?nope=1",      // unknown parameter
	} {
		l, err := dlock.Open(ctx, raw)
		if !errors.Is(err, dlock.ErrInvalidURL) {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", raw, err)
		}
	}
}
