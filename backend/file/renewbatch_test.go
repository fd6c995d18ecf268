package file

import (
	"context"
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
