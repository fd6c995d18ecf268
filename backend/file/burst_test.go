package file_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/file"
	"github.com/dlock-go/dlock/conformance"
)

// A burst of 5,000 Locks on one Locker at a 3s TTL. An attempt is CPU
// work on its key's file: without the bound on attempts at work
// (maxInFlight) 5,000 of them shared the cores and each took seconds, and
// 13 to 663 of a burst's Locks failed (granted after their window, or
// their renewals late), the earlier hold with them in one run of three.
// The bound alone was not enough while a lease counted from the call (the
// wait for a turn counted against it: 672 to 2,329 failed), nor was
// counting it from its write alone (6 to 29).
func TestBurstKeepsHolds(t *testing.T) {
	dir := t.TempDir()
	open := func() *dlock.Locker {
		l, err := file.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	conformance.BurstKeepsHolds(t, open(), open(), 5000, 3*time.Second)
}
