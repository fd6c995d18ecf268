package redissentinel_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis/redissentinel"
	"github.com/dlock-go/dlock/internal/testenv"
)

// Importing the package registers both schemes, and a URL of either opens
// a Locker that locks on the primary the Sentinels name.
func TestOpenLocksOnThePrimary(t *testing.T) {
	for _, s := range []string{redissentinel.Scheme, redissentinel.SchemeTLS} {
		if !slices.Contains(dlock.Schemes(), s) {
			t.Fatalf("scheme %s not registered: %v", s, dlock.Schemes())
		}
	}
	raw := testenv.Endpoint(t, "DLOCK_REDIS_SENTINEL_URL")
	ctx := testenv.Context(t, time.Minute)
	l, err := dlock.Open(ctx, raw+"&prefix="+testenv.Unique(t, "rs"))
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	defer l.Close()
	m, err := l.NewMutex("k")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	first := m.Token()
	other, err := l.NewMutex("k")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a second TryLock of a held key: %v, want ErrNotAcquired", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := m.Lock(ctx); err != nil || m.Token() <= first {
		t.Fatalf("Lock again: token %d after %d, %v", m.Token(), first, err)
	}
	_ = m.Unlock(ctx)
}

// Malformed Sentinel URLs are refused with ErrInvalidURL before any dial.
func TestInvalidURLs(t *testing.T) {
	ctx := testenv.Context(t, 10*time.Second)
	for _, raw := range []string{
		"redis+sentinel://127.0.0.1:1",                      // master_name missing
		"redis+sentinel://127.0.0.1:1?master_name=m&nope=1", // unknown parameter
		"redis+sentinel://?master_name=m",                   // no hosts
		"redis+sentinel://127.0.0.1:1?master_name=m&addr=x", // hosts go in the URL
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
