package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
)

// A burst of 5,000 Locks on one Locker at a 3s TTL: renewals share the
// pool with the acquisitions. Without the bound on acquire attempts in
// flight (as many as the pool has connections) the earlier hold's renewal
// waited for a connection until its window had run out, and the hold was
// given up.
func TestBurstKeepsHolds(t *testing.T) {
	e := newEnv(t)
	open := func() *dlock.Locker {
		l, err := openLocker(context.Background(), e.raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	conformance.BurstKeepsHolds(t, open(), open(), 5000, 3*time.Second)
}
