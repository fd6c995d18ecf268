package redlock

import "github.com/dlock-go/dlock/internal/redislua"

// The scripts run on each instance, all .lua files of internal/redislua.
// Each is atomic on its instance; the quorum logic lives in Go. Release
// (compare-and-delete, then PUBLISH or a handoff) and renew
// (compare-and-PEXPIRE) are the single-instance scripts; acquire and fence
// are Redlock's own: phase 1 returns the instance's counter and, when
// refused, the holder (to tell a clear winner from a split vote), and
// phase 2 raises a counter to the token. See redlockacquire.lua and
// fence.lua for their KEYS, ARGV and replies.
var (
	acquireScript = redislua.RedlockAcquire
	fenceScript   = redislua.Fence
)
