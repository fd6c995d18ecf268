package consul

import (
	"testing"

	"github.com/dlock-go/dlock/conformance"
)

// A burst of 5,000 Locks on one Locker at the shortest TTL: session
// renewals go through the same agent and Raft log as the acquisitions.
// Without the bound on acquire attempts in flight (maxInFlight) the
// earlier hold's renewal waited until its window had run out, and the
// hold was given up.
func TestBurstKeepsHolds(t *testing.T) {
	conformance.BurstKeepsHolds(t, testLocker(t, ""), testLocker(t, ""), 5000, MinTTL)
}
