package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A server whose maxmemory-policy may evict keys is refused unless the URL
// (or Config) allows it.
func TestEvictionPolicy(t *testing.T) {
	srv := startTempServer(t)
	admin := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"} {
		if err := admin.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		l, err := dlock.Open(ctx, srv.url())
		if err == nil {
			_ = l.Close()
			t.Fatalf("Open with maxmemory-policy %s succeeded; want ErrEvictionPolicy", policy)
		}
		if !errors.Is(err, ErrEvictionPolicy) || errors.Is(err, dlock.ErrUnavailable) {
			t.Fatalf("Open with maxmemory-policy %s: %v; want ErrEvictionPolicy", policy, err)
		}
		if _, err := New(ctx, admin, Config{}); !errors.Is(err, ErrEvictionPolicy) {
			t.Fatalf("New with maxmemory-policy %s: %v; want ErrEvictionPolicy", policy, err)
		}
		l, err = dlock.Open(ctx, srv.url()+"?allow_eviction=true")
		if err != nil {
			t.Fatalf("Open with allow_eviction=true: %v", err)
		}
		_ = l.Close()
		l, err = New(ctx, admin, Config{AllowEviction: true})
		if err != nil {
			t.Fatalf("New with AllowEviction: %v", err)
		}
		_ = l.Close()
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	l, err := dlock.Open(ctx, srv.url())
	if err != nil {
		t.Fatalf("Open with noeviction: %v", err)
	}
	_ = l.Close()
}
