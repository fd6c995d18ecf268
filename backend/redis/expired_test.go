package redis

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

// A holder whose key expired and was taken by another client can neither
// release nor renew the new holder's lock. This goes to the driver
// directly: dlock's own bookkeeping would refuse the stale renew before it
// reached Redis.
func TestExpiredHolderCannotTouchSuccessor(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		raw := withParams(t, endpoint, "prefix", testPrefix)
		u, _ := url.Parse(raw)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d1, err := openDriver(ctx, u, newClient)
		if err != nil {
			t.Fatal(err)
		}
		defer d1.Close()
		d2, err := openDriver(ctx, u, newClient)
		if err != nil {
			t.Fatal(err)
		}
		defer d2.Close()
		admin := adminClient(t, raw)
		key := "expired/" + t.Name() + "/" + time.Now().Format(time.RFC3339Nano)
		lockKey := LockKey(testPrefix, key)

		old, err := d1.TryAcquire(ctx, driver.Request{Key: key, TTL: 100 * time.Millisecond, Owner: "old-owner-0123456789abcdef012345"})
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		next, err := d2.TryAcquire(ctx, driver.Request{Key: key, TTL: 30 * time.Second, Owner: "new-owner-0123456789abcdef012345"})
		if err != nil {
			t.Fatalf("TryAcquire after expiry: %v", err)
		}
		if next.Token <= old.Token {
			t.Fatalf("token %d after the takeover; want > %d", next.Token, old.Token)
		}
		if _, err := d1.Renew(ctx, old); !errors.Is(err, driver.ErrNotHeld) {
			t.Fatalf("Renew by the expired holder: %v; want ErrNotHeld", err)
		}
		if err := d1.Release(ctx, old); !errors.Is(err, driver.ErrNotHeld) {
			t.Fatalf("Release by the expired holder: %v; want ErrNotHeld", err)
		}
		if v := admin.Get(ctx, lockKey).Val(); v != "new-owner-0123456789abcdef012345" {
			t.Fatalf("lock value %q; want the new holder's", v)
		}
		if pttl := admin.PTTL(ctx, lockKey).Val(); pttl <= 20*time.Second || pttl > 30*time.Second {
			t.Fatalf("new holder's PTTL %v; want its own lease, untouched", pttl)
		}
		if _, err := d2.Renew(ctx, next); err != nil {
			t.Fatalf("Renew by the new holder: %v", err)
		}
		if err := d2.Release(ctx, next); err != nil {
			t.Fatalf("Release by the new holder: %v", err)
		}
		if n := admin.Exists(ctx, lockKey).Val(); n != 0 {
			t.Fatal("lock key left after the new holder's release")
		}
	})
}

// A waiter whose next attempt finds the lock already its own (a release
// granted it, and the message did not reach the waiter first) counts its
// validity window from the lease that attempt read, not from its last
// refused attempt, which may be most of a refresh interval earlier; and
// the window still ends before the server's lease does.
func TestAttemptFindingItsGrant(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		raw := withParams(t, endpoint, "prefix", testPrefix)
		u, _ := url.Parse(raw)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d1, err := openDriver(ctx, u, newClient)
		if err != nil {
			t.Fatal(err)
		}
		defer d1.Close()
		d2, err := openDriver(ctx, u, newClient)
		if err != nil {
			t.Fatal(err)
		}
		defer d2.Close()
		key := "grantfound/" + t.Name() + "/" + time.Now().Format(time.RFC3339Nano)
		const ttl = 3 * time.Second
		h1, err := d1.TryAcquire(ctx, driver.Request{Key: key, TTL: ttl, Owner: "holder-0123456789abcdef0123456789"})
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		st := d2.newState(driver.Request{Key: key, TTL: ttl, Owner: "waiter-0123456789abcdef0123456789"})
		// The waiter's inbox is subscribed, as a waiting Lock's is (a
		// release grants only to a waiter that can hear it), but nothing
		// reads the grant.
		w, err := d2.subs.watch(ctx, redislua.InboxChannel(st.calls.Channel(), d2.inbox), st.calls.Owner(), false)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Close()
		var held *driver.HeldError
		if _, err := d2.attempt(ctx, st, "", true); !errors.As(err, &held) {
			t.Fatalf("waiter's attempt on a held key: %v; want HeldError", err)
		}
		time.Sleep(time.Second)
		if err := d1.Release(ctx, h1); err != nil {
			t.Fatalf("Release: %v", err)
		}
		granted := time.Now()
		if v := adminClient(t, raw).Get(ctx, LockKey(testPrefix, key)).Val(); v != st.calls.Owner() {
			t.Fatalf("lock is %q after the release; want it granted to the waiter", v)
		}
		h, err := d2.attempt(ctx, st, "", true)
		if err != nil {
			t.Fatalf("attempt after the grant: %v", err)
		}
		if h.Since.Before(granted.Add(-200 * time.Millisecond)) {
			t.Fatalf("window counted from %v before the grant; want from about the grant", granted.Sub(h.Since))
		}
		pttl, err := adminClient(t, raw).PTTL(ctx, LockKey(testPrefix, key)).Result()
		if err != nil {
			t.Fatalf("PTTL: %v", err)
		}
		if end := h.Since.Add(ttl); time.Until(end) > pttl {
			t.Fatalf("window ends in %v, after the server's lease (PTTL %v)", time.Until(end), pttl)
		}
		_ = d2.Release(ctx, h)
	})
}
