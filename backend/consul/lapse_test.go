package consul

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// openDriver opens a driver on the test agent with URL parameters params,
// closed when the test ends.
func openDriver(t *testing.T, ctx context.Context, params string) *consulDriver {
	t.Helper()
	d, err := open(ctx, testURL(t, endpoint(t), params))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d.(*consulDriver)
}

// A lapsing hold keeps its key locked for d after ReleaseAfter, also once
// its driver is closed (which destroys the driver's sessions), then frees
// it: a Lock blocked on another Locker meanwhile is granted. Both session
// modes.
func TestReleaseAfterHoldsThenFrees(t *testing.T) {
	for _, params := range sessionModes {
		t.Run(params, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 90*time.Second)
			d1 := openDriver(t, ctx, params)
			l2, err := dlock.NewLocker(openDriver(t, ctx, params))
			if err != nil {
				t.Fatal(err)
			}
			key := testKey(t, "k")
			h, err := d1.TryAcquire(ctx, driver.Request{Key: key, TTL: MinTTL, Owner: "a", Meta: "lapsing"})
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			const lapse = 3 * time.Second
			start := time.Now()
			if err := d1.ReleaseAfter(ctx, h, lapse); err != nil {
				t.Fatalf("ReleaseAfter: %v", err)
			}
			if err := d1.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			m, err := l2.NewMutex(key, dlock.WithTTL(MinTTL))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("TryLock during the lapse, after the releasing driver closed: %v; want ErrNotAcquired", err)
			}
			if info, err := l2.Inspect(ctx, key); err != nil || !info.Held || info.Owner != "lapsing" {
				t.Fatalf("Inspect during the lapse: %+v, %v; want held, with the hold's description", info, err)
			}
			if err := m.Lock(ctx); err != nil {
				t.Fatalf("Lock after the lapse: %v", err)
			}
			if took := time.Since(start); took < lapse {
				t.Fatalf("granted %v after ReleaseAfter(%v): the lapse ended early", took, lapse)
			}
			if uint64(m.Token()) <= h.Token {
				t.Fatalf("token %d after the lapse, not above the lapsed hold's %d", m.Token(), h.Token)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		})
	}
}

// ReleaseAfter of a hold broken from outside changes nothing: the key's
// next holder keeps it, and the call says ErrNotHeld.
func TestReleaseAfterBroken(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	d1, d2 := openDriver(t, ctx, "lockdelay=0s"), openDriver(t, ctx, "lockdelay=0s")
	key := testKey(t, "k")
	h, err := d1.TryAcquire(ctx, driver.Request{Key: key, TTL: MinTTL, Owner: "a"})
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := d2.Break(ctx, key); err != nil {
		t.Fatalf("Break: %v", err)
	}
	h2, err := d2.TryAcquire(ctx, driver.Request{Key: key, TTL: MinTTL, Owner: "b"})
	if err != nil {
		t.Fatalf("TryAcquire after Break: %v", err)
	}
	if err := d1.ReleaseAfter(ctx, h, 3*time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("ReleaseAfter of a broken hold: %v; want ErrNotHeld", err)
	}
	kv, _, err := d2.c.KV().Get(d2.path(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h2.State.(*hold).owns(kv) {
		t.Fatalf("the next holder's key was changed by a stale ReleaseAfter: %+v", kv)
	}
	if err := d2.Release(ctx, h2); err != nil {
		t.Fatalf("Release of the next holder: %v", err)
	}
}
