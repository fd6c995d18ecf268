package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A release that a majority answers later than the per-instance timeout
// (but well within the hold's lease) still releases the key: Unlock
// succeeds, and the key is free for another Locker at once rather than
// when its lease runs out. Before releasePatience, Unlock gave up on those
// instances after the per-instance timeout (100ms here) and returned
// ErrUnavailable, and their locks were kept until the lease ended.
func TestReleaseAnsweredLateReleases(t *testing.T) {
	// Masters of its own: the pause would slow every other test that uses
	// the shared ones meanwhile.
	m := privateMasters(t)
	raw := withParams(t, m.url, "timeout", "100ms")
	l, other := openLocker(t, raw), openLocker(t, raw)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = 10 * time.Second // the per-instance timeout stays 100ms
	mx, err := l.NewMutex("late-release", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := mx.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Hold back every write on a majority for 400ms: the release's script
	// is answered there only then.
	admins := adminClients(t, m.addrs)
	for _, c := range admins[:3] {
		if err := c.Do(ctx, "CLIENT", "PAUSE", 400, "WRITE").Err(); err != nil {
			t.Fatalf("CLIENT PAUSE: %v", err)
		}
	}
	if err := mx.Unlock(ctx); err != nil {
		t.Fatalf("Unlock answered late by a majority: %v", err)
	}
	p, err := other.NewMutex("late-release", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.TryLock(ctx); err != nil {
		t.Fatalf("another Locker's TryLock after the Unlock: %v; want the key free", err)
	}
	if err := p.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
