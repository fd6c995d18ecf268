package file

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
)

// acquireKeys takes the keys k0 to k(n-1) through d, key ki for owner oi.
func acquireKeys(tb testing.TB, d *fileDriver, n int, ttl time.Duration) []driver.Hold {
	tb.Helper()
	hs := make([]driver.Hold, n)
	for i := range hs {
		h, err := d.TryAcquire(context.Background(), driver.Request{Key: "k" + strconv.Itoa(i), TTL: ttl, Owner: "o" + strconv.Itoa(i)})
		if err != nil {
			tb.Fatal(err)
		}
		hs[i] = h
	}
	return hs
}

// RenewBatch judges each hold as Renew does: the live ones get a new lease,
// a released one is ErrNotHeld, and a cancelled context renews nothing.
func TestRenewBatch(t *testing.T) {
	d := newDriver(t.TempDir())
	t.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	const n = 20
	hs := acquireKeys(t, d, n, time.Second)
	if err := d.Release(ctx, hs[3]); err != nil {
		t.Fatal(err)
	}
	hs[5].TTL = time.Minute
	ttls, errs := d.RenewBatch(ctx, hs)
	for i := range hs {
		if i == 3 {
			if !errors.Is(errs[i], driver.ErrNotHeld) {
				t.Fatalf("released hold: %v; want ErrNotHeld", errs[i])
			}
			continue
		}
		if errs[i] != nil || ttls[i] != hs[i].TTL {
			t.Fatalf("hold %d: ttl %v, err %v; want %v", i, ttls[i], errs[i], hs[i].TTL)
		}
	}
	// The longer lease is on the file: another acquire is refused after
	// the first second.
	time.Sleep(1100 * time.Millisecond)
	if _, err := d.TryAcquire(ctx, driver.Request{Key: "k5", TTL: time.Second, Owner: "other"}); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("acquire of a key renewed for a minute: %v; want ErrNotAcquired", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, errs := d.RenewBatch(cctx, hs[5:6]); !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("RenewBatch with a cancelled context: %v; want context.Canceled", errs[0])
	}
}

// BenchmarkRenewBatch renews 10,000 holds in the calls the watchdog makes
// (RenewBatch, 1,024 holds each): the cost and the allocations of a
// renewal per hold.
//
//	go test -run '^$' -bench RenewBatch -benchmem ./backend/file/
func BenchmarkRenewBatch(b *testing.B) {
	const n = 10000
	d := newDriver(b.TempDir())
	b.Cleanup(func() { _ = d.Close() })
	hs := acquireKeys(b, d, n, time.Minute)
	conformance.BenchRenewBatch(b, d, hs)
}

// A renewal that comes after the release changes nothing: what lets an
// Unlock leave the renewal batch its hold is in.
func TestOwnerCheckedRenewals(t *testing.T) {
	d := newDriver(t.TempDir())
	t.Cleanup(func() { _ = d.Close() })
	conformance.CheckOwnerCheckedRenewals(t, d, "late")
}
