package dlockotel

import (
	"context"
	"errors"
	"github.com/dlock-go/dlock/observe"

	"github.com/dlock-go/dlock"
)

// errorTypeOther is the semantic conventions' error.type for an error that
// matches none of the known ones.
const errorTypeOther = "_OTHER"

// errorTypes are the error.type values, each of dlock's sentinel errors it
// stands for, in the order they are tried: a lost hold's error also wraps
// the backend's detail (unavailable, say), and the loss is what counts.
var errorTypes = []struct {
	err  error
	name string
}{
	{dlock.ErrMaxHoldReached, "max_hold_reached"},
	{dlock.ErrLockLost, "lock_lost"},
	{dlock.ErrClosed, "closed"},
	{dlock.ErrNotAcquired, "not_acquired"},
	{dlock.ErrAlreadyHeld, "already_held"},
	{dlock.ErrNotHeld, "not_held"},
	{dlock.ErrUnavailable, "unavailable"},
	{dlock.ErrInvalidKey, "invalid_key"},
	{dlock.ErrInvalidOption, "invalid_option"},
	{context.DeadlineExceeded, "deadline_exceeded"},
	{context.Canceled, "canceled"},
}

// errorType is the error.type of a failed outcome: a short, stable name of
// the sentinel err matches (low cardinality, as the semantic conventions
// want), or "_OTHER". A call that was called off (OutcomeCanceled) is
// "canceled" or "deadline_exceeded", whatever the backend's request that it
// cut short returned.
func errorType(outcome observe.Outcome, err error) string {
	if outcome == observe.OutcomeCanceled {
		if errors.Is(err, context.DeadlineExceeded) {
			return "deadline_exceeded"
		}
		return "canceled"
	}
	for _, t := range errorTypes {
		if errors.Is(err, t.err) {
			return t.name
		}
	}
	return errorTypeOther
}
