package redis

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/internal/testenv"
)

// A burst of 5,000 Locks on one Locker at a 3s TTL: renewals share the
// client's pool with the acquisitions. Without the bound on acquire
// attempts in flight (maxInFlight) the earlier hold's renewal waited for a
// connection until its window had run out, and the hold was given up.
func TestBurstKeepsHolds(t *testing.T) {
	raw := withParams(t, testenv.Endpoint(t, "DLOCK_REDIS_URL"), "prefix", testPrefix)
	open := func() *dlock.Locker {
		l, err := openLocker(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	conformance.BurstKeepsHolds(t, open(), open(), 5000, 3*time.Second)
}
