package redislua

import (
	"strconv"
	"strings"
	"time"
)

// Granted is the message Release publishes to a waiter it granted the
// lock to (mode Grant or Handoff): "member:token:elapsed:attempt", see
// release.lua.
type Granted struct {
	// Member is the waiter the lock was set to (its owner value).
	Member string
	// Token is the lock's fencing token.
	Token uint64
	// Elapsed is how long, by the server's clock, after the waiter's last
	// refresh of its queue entry the grant was made.
	Elapsed time.Duration
	// Attempt names the waiter's attempt that made that refresh: the
	// waiter counts Elapsed from that attempt's sending, and from no other.
	Attempt string
}

// ParseGrant reads a grant message as release.lua writes it,
// "member:token:elapsed:attempt": a member that is not empty, a token that
// is a positive decimal, elapsed a decimal number of milliseconds, and an
// attempt that is not empty. Anything else (a wake-up that names a waiter
// only, a message for every waiter) is not a grant, and ok is false.
func ParseGrant(payload string) (g Granted, ok bool) {
	member, rest, ok := strings.Cut(payload, ":")
	if !ok || member == "" {
		return Granted{}, false
	}
	tok, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return Granted{}, false
	}
	ms, attempt, ok := strings.Cut(rest, ":")
	if !ok || attempt == "" {
		return Granted{}, false
	}
	token, err := strconv.ParseUint(tok, 10, 64)
	if err != nil || token == 0 {
		return Granted{}, false
	}
	elapsed, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || elapsed < 0 {
		return Granted{}, false
	}
	return Granted{Member: member, Token: token, Elapsed: time.Duration(elapsed) * time.Millisecond, Attempt: attempt}, true
}
