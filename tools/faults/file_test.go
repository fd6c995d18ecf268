package faults

import (
	"testing"
	"time"

	_ "github.com/dlock-go/dlock/backend/file"
)

// The harness itself, on the one backend that needs no server: workers are
// real processes sharing a file:// lock directory. This runs under make
// test; the full matrix (make faults) needs every server.
func TestHarnessOnFile(t *testing.T) {
	b := Backend{Name: "file", URL: "file://" + t.TempDir(), TTL: time.Second, Liveness: 2 * time.Second}
	t.Run("1-baseline", func(t *testing.T) { baseline(t, b) })
	t.Run("2-pause-past-lease", func(t *testing.T) { pausePastLease(t, b) })
	t.Run("3-short-pause", func(t *testing.T) { shortPause(t, b) })
	t.Run("4-holder-killed", func(t *testing.T) { holderKilled(t, b) })
	t.Run("14-leader-paused-past-lease", func(t *testing.T) { leaderPausedPastLease(t, b) })
	t.Run("15-leader-killed", func(t *testing.T) { leaderKilled(t, b) })
}
