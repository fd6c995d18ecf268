package etcd_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
)

// TTLs below etcd's 2s minimum are an error at NewMutex (driver.Limiter);
// others are rounded up to whole seconds and the granted TTL is reported.
func TestTTL(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	l := e.mustLocker(t)
	for _, ttl := range []time.Duration{time.Second, 1999 * time.Millisecond} {
		if _, err := l.NewMutex("k", dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Fatalf("NewMutex with TTL %v: %v; want ErrInvalidOption", ttl, err)
		}
	}
	if _, err := e.newLocker(ctxFor(t, 10*time.Second), dlock.WithTTL(time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("Locker with default TTL 1s: %v; want ErrInvalidOption", err)
	}
	ctx := ctxFor(t, 30*time.Second)
	for ttl, want := range map[time.Duration]time.Duration{
		etcd.MinTTL:             2 * time.Second,
		2500 * time.Millisecond: 3 * time.Second,
		10 * time.Second:        10 * time.Second,
	} {
		m, err := l.NewMutex("ttl-"+ttl.String(), dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("NewMutex with TTL %v: %v", ttl, err)
		}
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		// The lease runs from a request sent during Lock (or the last
		// keep-alive before it), so it ends no later than one TTL after
		// Lock returned.
		returned := time.Now()
		lease := m.Lease()
		if lease.TTL != want {
			t.Errorf("TTL %v: granted %v; want %v", ttl, lease.TTL, want)
		}
		if lease.Expires.After(returned.Add(want)) {
			t.Errorf("TTL %v: Expires %v after Lock returned; want at most %v", ttl, lease.Expires.Sub(returned), want)
		}
		// The server agrees: the holder's lease has that TTL.
		resp, err := e.holder(ctx, m.Key())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("holder of %q: %v %v", m.Key(), resp, err)
		}
		ttlResp, err := e.admin.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
		if err != nil {
			t.Fatalf("TimeToLive: %v", err)
		}
		if time.Duration(ttlResp.GrantedTTL)*time.Second != want {
			t.Errorf("TTL %v: server granted %ds; want %v", ttl, ttlResp.GrantedTTL, want)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
}

// The fencing token is the create revision of the holder's own entry.
func TestTokenIsCreateRevision(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := ctxFor(t, 30*time.Second)
	l1, l2 := e.mustLocker(t), e.mustLocker(t)
	var last dlock.Token
	for i, l := range []*dlock.Locker{l1, l2, l1} {
		m, _ := l.NewMutex("tok")
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		resp, err := e.holder(ctx, "tok")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("holder: %v %v", resp, err)
		}
		if got := dlock.Token(resp.Kvs[0].CreateRevision); got != m.Token() {
			t.Fatalf("holder %d: Token %d; its entry's create revision is %d", i, m.Token(), got)
		}
		if m.Token() <= last {
			t.Fatalf("holder %d: token %d not above %d", i, m.Token(), last)
		}
		last = m.Token()
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
}

// A lease revoked from outside, or the entry deleted from outside, closes
// Done at once: through the watch on the holder's own entry, long before
// the TTL would let the watchdog notice.
func TestLossFromOutside(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			e := newEnv(t, tp.envVar)
			l := e.mustLocker(t, dlock.WithTTL(time.Minute))
			ctx := ctxFor(t, time.Minute)
			for name, breakIt := range map[string]func(key string) error{
				"revoke": func(key string) error { return e.breakLease(ctx, key) },
				"delete": func(key string) error {
					resp, err := e.holder(ctx, key)
					if err != nil || len(resp.Kvs) != 1 {
						return errors.New("no holder")
					}
					_, err = e.admin.Delete(ctx, string(resp.Kvs[0].Key))
					return err
				},
			} {
				m, _ := l.NewMutex("loss-" + name)
				if err := m.Lock(ctx); err != nil {
					t.Fatalf("Lock: %v", err)
				}
				done := m.Done()
				broken := time.Now()
				if err := breakIt(m.Key()); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				select {
				case <-done:
					t.Logf("%s: Done closed %v after the break", name, time.Since(broken))
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: Done still open 10s after the break (TTL 1m)", name)
				}
				if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
					t.Fatalf("%s: Unlock after loss: %v; want ErrLockLost", name, err)
				}
				// The key is free again, and the Mutex can take it anew.
				if err := m.TryLock(ctx); err != nil {
					t.Fatalf("%s: TryLock after loss: %v", name, err)
				}
				if err := m.Unlock(ctx); err != nil {
					t.Fatalf("%s: Unlock: %v", name, err)
				}
			}
		})
	}
}
