package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
	"github.com/dlock-go/dlock/internal/launcher"
)

// A leader paused past the lease TTL wakes up with every lease in its
// memory, finds them expired and has them revoked, also the ones the new
// leader kept alive meanwhile. So a hold granted before the leader
// changed is never extended by keepalives the new leader answers: its
// validity window does not reach past the pause by more than a TTL, and
// the hold is reported lost. A Lock after the election is granted a lease
// of the new term, which renewals extend as usual.
func TestLeaderPauseEndsEarlierLeases(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD3_URL")
	ctx := ctxFor(t, 3*time.Minute)
	leader := etcd3Leader(ctx, t)
	paused := false
	t.Cleanup(func() {
		if paused {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = launcher.Resume(sctx, leader)
		}
	})

	// Longer than the election, so that the hold would outlive it if the
	// new leader's keepalives counted.
	const ttl = 2 * etcd.MinTTL
	l := e.mustLocker(t, dlock.WithTTL(ttl))
	m, _ := l.NewMutex("leader-pause")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl) // renewed under the leader that granted it

	if err := launcher.Pause(ctx, leader); err != nil {
		t.Fatalf("Pause(%s): %v", leader, err)
	}
	paused = true
	// Whatever the paused leader answered was sent before this instant.
	bound := time.Now().Add(ttl)
	var latest time.Time // the furthest validity the hold reported
	watch := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if exp := m.Lease().Expires; exp.After(latest) {
				latest = exp
			}
		}
	}
	watch(4 * time.Second) // a new leader is elected within about 1.5s
	if err := launcher.Resume(ctx, leader); err != nil {
		t.Fatalf("Resume(%s): %v", leader, err)
	}
	paused = false
	watch(ttl)

	if latest.After(bound) {
		t.Errorf("the hold's validity reached %v past the pause plus a TTL: a keepalive of the new leader extended a lease of the old one",
			latest.Sub(bound).Round(time.Millisecond))
	}
	select {
	case <-m.Done():
	default:
		t.Fatalf("the hold granted before the pause still stands %v after it", time.Since(bound.Add(-ttl)).Round(time.Millisecond))
	}
	if err := m.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("the hold ended with %v; want ErrLockLost", err)
	}
	waitCaughtUp(t, e.admin)

	// A lease of the new term is renewed as before.
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock after the election: %v", err)
	}
	first := m.Lease().Expires
	time.Sleep(2 * ttl)
	select {
	case <-m.Done():
		t.Fatalf("a hold granted after the election was lost: %v", m.Err())
	default:
	}
	if exp := m.Lease().Expires; !exp.After(first) {
		t.Fatalf("a hold granted after the election was not renewed: validity %v, first %v", exp, first)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
