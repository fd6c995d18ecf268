package redlock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/conformance"
)

// A burst of 5,000 Locks on one Locker at a 3s TTL. Without the bound on
// acquire attempts in flight (maxInFlight) each instance had a thousand
// acquisitions of this client to answer ahead of every new request, and
// 1,594 and 2,697 of the burst's Locks failed in two of four runs, their
// instances past the per-instance timeout. The per-instance timeout is
// 300ms here, not the default 100ms: it bounds the client's own latency
// too, and 5,000 goroutines starting at once under the race detector on a
// shared 2-core machine kept a few flushers from running for that long
// with or without the bound (0 to 61 Locks of a burst at 100ms).
func TestBurstKeepsHolds(t *testing.T) {
	raw := withParams(t, endpoint(t), "prefix", testPrefix(), "timeout", "300ms")
	conformance.BurstKeepsHolds(t, openLocker(t, raw), openLocker(t, raw), 5000, 3*time.Second)
}
