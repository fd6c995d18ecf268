package zookeeper

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/conformance"
)

// A burst of 5,000 Locks on one Locker: ZooKeeper answers a session's
// requests in order, and the heartbeat that vouches for the session
// queued behind thousands of creates, listings and reads went unanswered
// for longer than half the session timeout, so the earlier hold was given
// up (and the grants could not confirm the session, so Locks failed).
// maxInFlight keeps the queue short.
func TestBurstKeepsHolds(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout=4s")
	_, l := lockerOn(t, raw)
	_, other := lockerOn(t, raw)
	conformance.BurstKeepsHolds(t, l, other, 5000, 4*time.Second)
}
