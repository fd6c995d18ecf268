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
	raw := endpoint(t)
	prefixed := withParams(t, raw, "prefix", testPrefix())
	l, other := openLocker(t, prefixed), openLocker(t, prefixed)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = 10 * time.Second // per-instance timeout: the default 100ms
	m, err := l.NewMutex("late-release", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Hold back every write on a majority for 400ms: the release's script
	// is answered there only then.
	admins := adminClients(t, hostsOf(t, raw))
	t.Cleanup(func() { // a failed run leaves no pause behind for the next test
		for _, c := range admins[:3] {
			_ = c.Do(context.Background(), "CLIENT", "UNPAUSE").Err()
		}
	})
	for _, c := range admins[:3] {
		if err := c.Do(ctx, "CLIENT", "PAUSE", 400, "WRITE").Err(); err != nil {
			t.Fatalf("CLIENT PAUSE: %v", err)
		}
	}
	if err := m.Unlock(ctx); err != nil {
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
