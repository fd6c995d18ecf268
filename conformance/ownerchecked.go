package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// CheckOwnerCheckedRenewals checks on d, a driver that implements
// driver.OwnerCheckedRenewer and reports true, what that promises: a
// renewal of a hold that comes after its release (single, and batched when
// d is a driver.BatchRenewer) is refused with ErrNotHeld or ErrLockLost
// and changes nothing, even once another owner holds key: that owner's
// lease still ends when it would have, and the key can be taken then.
//
// It uses key, which must be free, and a TTL of a second (or the driver's
// MinTTL), and waits out one such lease.
func CheckOwnerCheckedRenewals(t *testing.T, d driver.Locker, key string) {
	t.Helper()
	oc, ok := d.(driver.OwnerCheckedRenewer)
	if !ok || !oc.OwnerCheckedRenewals() {
		t.Fatal("the driver does not report owner-checked renewals")
	}
	ttl := time.Second
	if lm, ok := d.(driver.Limiter); ok {
		ttl = max(ttl, lm.Limits().MinTTL)
	}
	ctx := context.Background()
	acquire := func(owner string) driver.Hold {
		t.Helper()
		h, err := d.TryAcquire(ctx, driver.Request{Key: key, TTL: ttl, Owner: owner})
		if err != nil {
			t.Fatalf("TryAcquire(%q) for %s: %v", key, owner, err)
		}
		return h
	}
	refused := func(err error) bool {
		return errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrLockLost)
	}
	old := acquire("0123456789abcdef0123456789abcde0")
	if err := d.Release(ctx, old); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next := acquire("0123456789abcdef0123456789abcde1")
	old.TTL = time.Hour
	if br, ok := d.(driver.BatchRenewer); ok {
		if _, errs := br.RenewBatch(ctx, []driver.Hold{old}); len(errs) != 1 || !refused(errs[0]) {
			t.Fatalf("RenewBatch of a released hold: %v; want one ErrNotHeld or ErrLockLost", errs)
		}
	}
	if _, err := d.Renew(ctx, old); !refused(err) {
		t.Fatalf("Renew of a released hold: %v; want ErrNotHeld or ErrLockLost", err)
	}
	// The next holder's lease is still its own.
	time.Sleep(ttl + 100*time.Millisecond)
	third := acquire("0123456789abcdef0123456789abcde2")
	if third.Token <= next.Token {
		t.Fatalf("token %d after %d", third.Token, next.Token)
	}
	if err := d.Release(ctx, third); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
