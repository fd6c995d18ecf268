package dlock

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock/observe"
)

// WithObserver adds an Observer (package observe) to every lock made from a
// Locker (Open, NewLocker) or to one lock (NewMutex and the other
// constructors). Given more than once, every observer sees every event, in
// the order given.
func WithObserver(o observe.Observer) Option {
	return func(opts *options) {
		if o != nil {
			opts.observers = append(opts.observers[:len(opts.observers):len(opts.observers)], o)
		}
	}
}

// observer returns the one Observer of a Mutex: nil with none, the one
// given, or all of them in turn.
func (o options) observer() observe.Observer {
	switch len(o.observers) {
	case 0:
		return nil
	case 1:
		return o.observers[0]
	}
	return multi(o.observers)
}

type multi []observe.Observer

func (ms multi) Begin(ctx context.Context, c observe.Call) context.Context {
	for _, o := range ms {
		ctx = o.Begin(ctx, c)
	}
	return ctx
}

func (ms multi) Step(ctx context.Context, c observe.Call, s observe.Step) {
	for _, o := range ms {
		o.Step(ctx, c, s)
	}
}

func (ms multi) End(ctx context.Context, c observe.Call, r observe.Result) {
	for _, o := range ms {
		o.End(ctx, c, r)
	}
}

func (ms multi) HoldEnd(e observe.HoldEnd) {
	for _, o := range ms {
		o.HoldEnd(e)
	}
}

// lockOutcome classifies the result of Lock or TryLock.
func lockOutcome(ctx context.Context, err error) observe.Outcome {
	switch {
	case err == nil:
		return observe.OutcomeAcquired
	case callerEnded(ctx, err):
		return observe.OutcomeCanceled
	case errors.Is(err, ErrNotAcquired), errors.Is(err, ErrAlreadyHeld):
		return observe.OutcomeNotAcquired
	}
	return observe.OutcomeError
}

// renewOutcome classifies the result of a renewal. One that was called
// off (Unlock, or the end of its caller's context, cut it short) did not
// fail. A renewal that ran into the hold's loss deadline did: that
// deadline is the renewal's own, not a caller's.
func renewOutcome(err error, calledOff bool) observe.Outcome {
	switch {
	case err == nil:
		return observe.OutcomeRenewed
	case errors.Is(err, ErrLockLost):
		return observe.OutcomeLost
	case calledOff:
		return observe.OutcomeCanceled
	}
	return observe.OutcomeFailed
}

// callerEnded reports whether err is the end of the caller's ctx.
func callerEnded(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// unlockOutcome classifies the result of Unlock.
func unlockOutcome(err error) observe.Outcome {
	switch {
	case err == nil:
		return observe.OutcomeReleased
	case errors.Is(err, ErrLockLost):
		return observe.OutcomeLost
	case errors.Is(err, ErrNotHeld):
		return observe.OutcomeNotHeld
	}
	return observe.OutcomeError
}
