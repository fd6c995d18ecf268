package dlock

import (
	"context"
	"errors"
	"time"
)

// Observer is told of every event of a hold's life, on every backend: the
// shape of go-redis's hooks and pgx's tracers. Give one to a Locker or a
// Mutex with WithObserver; package github.com/dlock-go/dlock/otel turns the
// events into OpenTelemetry metrics and spans, and WithLogger logs them with
// log/slog.
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
	Token    Token         // the hold's token, when there is one
	Duration time.Duration // from Call.Start to the outcome
	// Lease is the hold's lease after a successful Lock, TryLock or Renew.
	Lease Lease
	// Margin, for a successful renewal, is what was left of the validity
	// window when it succeeded: the early warning before a loss.
	Margin time.Duration
}

// HoldEnd reports the end of a hold.
type HoldEnd struct {
	Backend string
	Key     string
	Token   Token
	Held    time.Duration // from acquisition to the end
	Lost    bool
	// Cause is why the hold ended: ErrUnlocked or ErrClosed when its owner
	// ended it; when Lost, an error matching ErrLockLost and one of
	// ErrRenewalFailed, ErrReportedLost and ErrLeaseExpired (LossCause
	// names it).
	Cause error
}

// LossCause names why a hold was lost, as the instruments do:
// "renewal_failed", "backend_reported" or "expired_unrenewed"; "" for an
// error that is not a loss.
func LossCause(err error) string {
	switch {
	case errors.Is(err, ErrRenewalFailed):
		return "renewal_failed"
	case errors.Is(err, ErrReportedLost):
		return "backend_reported"
	case errors.Is(err, ErrLeaseExpired):
		return "expired_unrenewed"
	}
	return ""
}

// WithObserver adds an Observer to a Locker's Mutexes (Open, NewLocker) or
// to one Mutex (NewMutex). Given more than once, every observer sees every
// event, in the order given.
func WithObserver(o Observer) Option {
	return func(opts *options) {
		if o != nil {
			opts.observers = append(opts.observers[:len(opts.observers):len(opts.observers)], o)
		}
	}
}

// observer returns the one Observer of a Mutex: nil with none, the one
// given, or all of them in turn.
func (o options) observer() Observer {
	switch len(o.observers) {
	case 0:
		return nil
	case 1:
		return o.observers[0]
	}
	return multi(o.observers)
}

type multi []Observer

func (ms multi) Begin(ctx context.Context, c Call) context.Context {
	for _, o := range ms {
		ctx = o.Begin(ctx, c)
	}
	return ctx
}

func (ms multi) Step(ctx context.Context, c Call, s Step) {
	for _, o := range ms {
		o.Step(ctx, c, s)
	}
}

func (ms multi) End(ctx context.Context, c Call, r Result) {
	for _, o := range ms {
		o.End(ctx, c, r)
	}
}

func (ms multi) HoldEnd(e HoldEnd) {
	for _, o := range ms {
		o.HoldEnd(e)
	}
}

// lockOutcome classifies the result of Lock or TryLock.
func lockOutcome(ctx context.Context, err error) Outcome {
	switch {
	case err == nil:
		return OutcomeAcquired
	case callerEnded(ctx, err):
		return OutcomeCanceled
	case errors.Is(err, ErrNotAcquired), errors.Is(err, ErrAlreadyHeld):
		return OutcomeNotAcquired
	}
	return OutcomeError
}

// renewOutcome classifies the result of a renewal. One that was called
// off (Unlock, or the end of its caller's context, cut it short) did not
// fail. A renewal that ran into the hold's loss deadline did: that
// deadline is the renewal's own, not a caller's.
func renewOutcome(err error, calledOff bool) Outcome {
	switch {
	case err == nil:
		return OutcomeRenewed
	case errors.Is(err, ErrLockLost):
		return OutcomeLost
	case calledOff:
		return OutcomeCanceled
	}
	return OutcomeFailed
}

// callerEnded reports whether err is the end of the caller's ctx.
func callerEnded(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// unlockOutcome classifies the result of Unlock.
func unlockOutcome(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeReleased
	case errors.Is(err, ErrLockLost):
		return OutcomeLost
	case errors.Is(err, ErrNotHeld):
		return OutcomeNotHeld
	}
	return OutcomeError
}
