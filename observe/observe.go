// Package observe is the shape of the events a dlock hold goes through, for
// the programs that watch them: the OpenTelemetry adapter
// (github.com/dlock-go/dlock/otel), the slog logger that dlock.WithLogger
// installs, and any Observer of your own, given to a Locker or one lock
// with dlock.WithObserver. A program that only takes locks never imports it.
package observe

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Observer is told of every event of a hold's life, on every backend: the
// shape of go-redis's hooks and pgx's tracers. Give one to a Locker or a
// Mutex with dlock.WithObserver; package github.com/dlock-go/dlock/otel turns
// the events into OpenTelemetry metrics and spans, and dlock.WithLogger logs
// them with log/slog.
//
// The portable layer calls an Observer synchronously, from the goroutine
// making the call (Lock, TryLock, Unlock, Renew) or from the watchdog
// (renewals, losses), so its methods must be quick and must not call back
// into the Mutex. With no observer the cost is one nil check per event.
type Observer interface {
	// Begin is called when a call starts: Lock, TryLock, Unlock, Renew, or
	// a renewal by the watchdog (Call.Watchdog, with a context of its own,
	// not a request's). The context it returns is used for the rest of the
	// call, including the backend's requests, and is handed to Step and End:
	// return ctx itself when there is nothing to carry (a span, say).
	Begin(ctx context.Context, c Call) context.Context
	// Step reports a step of Lock's wait for a key held elsewhere.
	Step(ctx context.Context, c Call, s Step)
	// End reports the call's outcome.
	End(ctx context.Context, c Call, r Result)
	// HoldEnd reports that a hold ended: unlocked (or given back at
	// Close), or lost. It is called before the Mutex's Done closes, so
	// that a program woken by Done finds the end already reported; it
	// must therefore not wait for Done nor call Unlock on that Mutex.
	HoldEnd(e HoldEnd)
}

// Op is the call an event belongs to.
type Op uint8

// The calls an Observer sees.
const (
	OpLock Op = iota + 1
	OpTryLock
	OpUnlock
	OpRenew
)

func (o Op) String() string {
	switch o {
	case OpLock:
		return "lock"
	case OpTryLock:
		return "trylock"
	case OpUnlock:
		return "unlock"
	case OpRenew:
		return "renew"
	}
	return "unknown"
}

// Call identifies one call for an Observer.
type Call struct {
	Op      Op
	Backend string // the backend's URL scheme (redis, etcd, mem, ...)
	Key     string
	// Watchdog is true for a renewal made by the watchdog rather than by a
	// caller of Renew.
	Watchdog bool
	Start    time.Time
}

// Step is a step of Lock's wait.
type Step uint8

// The steps of a wait.
const (
	// StepWatch: the key was held; a watch for its release is now set.
	StepWatch Step = iota + 1
	// StepWoken: the backend signalled a change; Lock tries again.
	StepWoken
	// StepRetry: the holder's lease should have run out (expiry publishes
	// nothing); Lock tries again.
	StepRetry
	// StepQueued: the request waits in the backend's own queue (etcd,
	// ZooKeeper), which grants it in turn.
	StepQueued
)

func (s Step) String() string {
	switch s {
	case StepWatch:
		return "watch_set"
	case StepWoken:
		return "woken"
	case StepRetry:
		return "retried"
	case StepQueued:
		return "queued"
	}
	return "unknown"
}

// Outcome is how a call ended, as the instruments name it.
type Outcome string

// Outcomes of Lock and TryLock, of Renew, and of Unlock.
const (
	OutcomeAcquired    Outcome = "acquired"
	OutcomeNotAcquired Outcome = "not_acquired" // held elsewhere (TryLock), or already held by this Mutex
	OutcomeCanceled    Outcome = "canceled"     // the caller's context ended first, or Unlock cut the watchdog's renewal short
	OutcomeError       Outcome = "error"        // the backend failed, or the Locker was closed
	OutcomeRenewed     Outcome = "renewed"
	OutcomeFailed      Outcome = "failed" // a renewal that failed without losing the hold (yet)
	OutcomeLost        Outcome = "lost"   // the renewal, or the Unlock, found the hold lost
	OutcomeReleased    Outcome = "released"
	OutcomeNotHeld     Outcome = "not_held"
)

// Result is a call's outcome.
type Result struct {
	Outcome  Outcome
	Err      error         // nil on success
	Token    uint64        // the hold's fencing token, when there is one
	Duration time.Duration // from Call.Start to the outcome
	// TTL and Expires are the hold's lease (dlock.Lease) after a successful
	// Lock, TryLock or Renew: the lease granted and the end of the validity
	// window on this process's monotonic clock.
	TTL     time.Duration
	Expires time.Time
	// Margin, for a successful renewal, is what was left of the validity
	// window when it succeeded: the early warning before a loss.
	Margin time.Duration
}

// HoldEnd reports the end of a hold.
type HoldEnd struct {
	Backend string
	Key     string
	Token   uint64
	Held    time.Duration // from acquisition to the end
	Lost    bool
	// Cause is why the hold ended: dlock.ErrUnlocked or dlock.ErrClosed
	// when its owner ended it (a minimum hold, dlock.WithMinHold, that
	// keeps the key held past the Unlock is no loss: Lost is false); when
	// Lost, an error matching dlock.ErrLockLost and one of
	// dlock.ErrRenewalFailed, dlock.ErrReportedLost,
	// dlock.ErrLeaseExpired and dlock.ErrMaxHoldReached (LossCause names
	// it). A hold that reached its maximum (dlock.WithMaxHold) is Lost, but
	// by design, not by a failure: tell it apart with LossCause "max_hold".
	Cause error
}

// LossCause names why a hold was lost, as the instruments do:
// "renewal_failed", "backend_reported", "expired_unrenewed", or
// "max_hold" for a hold that reached its maximum duration (an intended
// end, not a failure); "" for an error that is not a loss.
func LossCause(err error) string {
	switch {
	case errors.Is(err, driver.ErrMaxHoldReached):
		return "max_hold"
	case errors.Is(err, driver.ErrRenewalFailed):
		return "renewal_failed"
	case errors.Is(err, driver.ErrReportedLost):
		return "backend_reported"
	case errors.Is(err, driver.ErrLeaseExpired):
		return "expired_unrenewed"
	}
	return ""
}
