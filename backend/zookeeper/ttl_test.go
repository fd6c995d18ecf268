package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// The lease is the session timeout the server granted, never the longer
// TTL asked for: the server may hand the lock on one session timeout after
// it last heard from the holder, so Lease().Expires must not lie past
// that. Without a TTL a Mutex gets the granted session timeout (also when
// the server granted less than the URL asked for); an explicit longer TTL
// is refused with ErrInvalidOption, at Open, NewMutex and New.
func TestTTLIsTheSessionTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The servers grant at most 60 s (maxSessionTimeout): asking for more
	// gets less.
	for _, asked := range []time.Duration{2 * time.Second, 10 * time.Minute} {
		raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout="+asked.String())
		d, l := lockerOn(t, raw)
		granted := d.sessionTimeout()
		if asked > time.Minute && granted >= asked {
			t.Fatalf("asked for a %v session, granted %v; want the server's clamp", asked, granted)
		}
		m, err := l.NewMutex(fmt.Sprintf("ttl/%d", time.Now().UnixNano()))
		if err != nil {
			t.Fatalf("session %v: NewMutex with no TTL: %v", granted, err)
		}
		lockNow(t, m)
		// The lease runs from a request sent during Lock, so it can end
		// no later than one session timeout after Lock returned.
		returned := time.Now()
		lease := m.Lease()
		if lease.TTL != granted {
			t.Errorf("session %v (asked %v): Lease().TTL = %v; want the session timeout", granted, asked, lease.TTL)
		}
		if lease.Expires.After(returned.Add(granted)) {
			t.Errorf("session %v: Lease().Expires %v after Lock returned; want at most the session timeout", granted, lease.Expires.Sub(returned))
		}
		if err := m.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		if got := m.Lease().TTL; got != granted {
			t.Errorf("session %v: Lease().TTL after Renew = %v; want the session timeout", granted, got)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := l.NewMutex("k", dlock.WithTTL(granted+time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("session %v: NewMutex(WithTTL(%v)): %v; want ErrInvalidOption", granted, granted+time.Second, err)
		}
	}

	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout=2s&ttl=30s")
	if l, err := dlock.Open(ctx, raw); !errors.Is(err, dlock.ErrInvalidOption) {
		if err == nil {
			_ = l.Close()
		}
		t.Errorf("Open(%s): %v; want ErrInvalidOption", raw, err)
	}
	conn := admin(t, endpoint(t, "DLOCK_ZK_URL", ""))
	if l, err := New(conn, Config{SessionTimeout: 2 * time.Second, Prefix: testPrefix}, dlock.WithTTL(30*time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		if err == nil {
			_ = l.Close()
		}
		t.Errorf("New with a TTL above the session timeout: %v; want ErrInvalidOption", err)
	}
}
