package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/redlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// On links whose round trip (about 200ms here, through proxies that delay
// every byte by 100ms each way) is well inside the per-instance timeout
// (500ms) but a fair part of it, locks are granted. A new connection's
// set-up costs round trips of its own; if it ran inside a request's
// timeout, every request would time out during it and drop its connection,
// and no lock would ever be granted.
func TestRedlockSlowLinks(t *testing.T) {
	raw := testenv.Endpoint(t, "DLOCK_REDLOCK_URL")
	px := NewProxies()
	defer px.Close()
	slow, link, err := px.Rewrite(raw + "?timeout=500ms&ttl=5s&prefix=dlocktest:slowlinks:" + randomSuffix())
	if err != nil {
		t.Fatal(err)
	}
	if err := link.Slow(100*time.Millisecond, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ocancel()
	l, err := dlock.Open(octx, slow)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, err := l.NewMutex("slow-links")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	granted := 0
	for i := 0; i < 60 && granted < 3; i++ {
		// A first attempt may time out while the connections are set up;
		// it must not stay that way.
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := m.TryLock(lctx); err == nil {
			granted++
			if err := m.Unlock(lctx); err != nil {
				t.Errorf("unlock: %v", err)
			}
		}
		cancel()
	}
	if granted < 3 {
		t.Fatalf("%d of 60 attempts granted on a slow link; want 3", granted)
	}
}

// randomSuffix keeps each run's keys apart on the shared servers.
func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + ":"
}
