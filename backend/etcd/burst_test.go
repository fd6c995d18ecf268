package etcd_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/conformance"
)

// A burst of 5,000 Locks on one Locker: every write goes through the one
// Raft log, and a keepalive of the shared lease counts only once a
// consensus response confirms it. Without the bound on operations in
// flight (maxInFlight) the lease went unconfirmed past its 30s TTL, the
// earlier hold was given up and most Locks failed.
func TestBurstKeepsHolds(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	conformance.BurstKeepsHolds(t, e.mustLocker(t), e.mustLocker(t), 5000, 30*time.Second)
}
